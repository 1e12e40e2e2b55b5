// Linear: y[N, out] = x[N, in] * W^T + b, with W stored [out, in] as in PyTorch.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h).
//
// Parameters: "<prefix>.weight" [out, in] (N(0, init_std), weight decay) and, when enabled,
// "<prefix>.bias" [out] (zeros, no decay). No caches: backward reads the forward input x,
// which the caller keeps alive. Any leading dims are allowed on x/y (rows = numel / in).
// Runs in its store's context (Note [Layer dispatch]): cpu:: below, or cuBLAS and two small
// kernels on CUDA (layers/cuda/linear_cuda.h); every tensor lives on that context's device.
#pragma once

#include "layers/param_set.h"

namespace sparq {

namespace cpu {
// x [n, in], w [out, in], b [out] or null, y [n, out].
template <typename T>
void linear_forward(const T* x, const T* w, const T* b, T* y, std::int64_t n, std::int64_t in,
                    std::int64_t out);
// dx [n, in] overwritten (skipped when null); dw [out, in] and db [out] (when non-null) +=.
template <typename T>
void linear_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::int64_t n,
                     std::int64_t in, std::int64_t out);
// db[j] += sum_i dy[i, j] for dy [n, cols], each column summed in ascending row order: the
// bias gradient of Linear and of VocabBias, the same bits for any thread count.
template <typename T>
void add_column_sums(const T* dy, T* db, std::int64_t n, std::int64_t cols);
}  // namespace cpu

class Linear : public ParamLayer {
 public:
  struct Config {
    std::int64_t in = 0;
    std::int64_t out = 0;
    bool bias = true;
    float init_std = 0.02f;
  };
  Linear(std::string prefix, Config config);

  void forward(const Tensor& x, const Tensor& y) const;
  // dx may be an empty Tensor when the input gradient is not needed (first layer).
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const;

  const Config& config() const { return config_; }
  const Tensor& weight() const { return params_.param(w_); }

 private:
  Config config_;
  int w_ = -1, b_ = -1;
};

}  // namespace sparq
