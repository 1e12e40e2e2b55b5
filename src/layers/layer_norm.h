// LayerNorm over the last dimension: y = (x - mean) * rstd * gamma + beta, with
// rstd = 1 / sqrt(biased variance + eps), per row of x [rows, C] (any leading dims).
//
// Gradients: see Note [Gradient rule] (layers/param_set.h).
//
// Parameters: "<prefix>.weight" [C] (ones) and "<prefix>.bias" [C] (zeros), no weight decay.
// Cache: the layer owns mean and rstd for up to `max_rows` rows, on its device: allocated on
// the host at construction and again on the device by bind() to a CUDA store (there with
// the scratch of the parameter-gradient reduction after them). Forward fills them and
// backward reads them together with the forward input x, which the caller keeps alive.
// y may not alias x; dx may not alias dy. Dispatch: Note [Layer dispatch]; the CUDA kernels
// are in layers/cuda/layer_norm_cuda.h.
#pragma once

#include "core/buffer.h"
#include "layers/param_set.h"

namespace sparq {

namespace cpu {
template <typename T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                        std::int64_t rows, std::int64_t c, T eps);
template <typename T>
void layer_norm_backward(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy,
                         T* dx, T* dgamma, T* dbeta, std::int64_t rows, std::int64_t c);
}  // namespace cpu

class LayerNorm : public ParamLayer {
 public:
  struct Config {
    std::int64_t dim = 0;
    float eps = 1e-5f;
    std::int64_t max_rows = 0;  // micro-batch rows (B * T) the cache is sized for
  };
  LayerNorm(std::string prefix, Config config);
  // ParamLayer::bind, then the cache moves to the store's device.
  void bind(const ParamStore& store);

  void forward(const Tensor& x, const Tensor& y);
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const;

  std::size_t cache_bytes() const { return cache_.size(); }
  // Statistics of the last forward, [rows], on the layer's device.
  Tensor mean() const { return cache_.view(DType::kF32, {rows_}); }
  Tensor rstd() const {
    return cache_.view(DType::kF32, {rows_}, config_.max_rows * sizeof(float));
  }

 private:
  Buffer allocate_cache() const;  // on the layer's device
  Config config_;
  int gamma_ = -1, beta_ = -1;
  Buffer cache_;  // mean [max_rows], rstd [max_rows], then (CUDA) the reduction scratch
  std::int64_t rows_ = 0;
};

}  // namespace sparq
