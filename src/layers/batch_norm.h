// BatchNorm2d on NCHW, as torch.nn.BatchNorm2d with affine weight and bias.
//   training: normalise with the batch mean and biased variance over (N, H, W) per channel,
//     then update running_mean/var <- (1 - momentum) * running + momentum * batch (the
//     running variance takes the UNBIASED batch variance, as PyTorch does);
//   eval: normalise with the running statistics.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h).
// Backward differentiates the mode of the last forward.
//
// Parameters: "<prefix>.weight" [C] (ones), "<prefix>.bias" [C] (zeros), no weight decay.
// Running statistics are state, not parameters: the layer owns them (running_mean() and
// running_var() expose them for checkpoints), with the per-channel mean and inverse std of
// the last forward as the backward cache. backward reads the forward input x.
#pragma once

#include "core/buffer.h"
#include "layers/param_set.h"

namespace sparq {

namespace cpu {
// x [n, c, hw]. Training fills mean/invstd with batch statistics and updates the running
// ones; eval copies the running statistics into mean/invstd.
template <typename T>
void batch_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* invstd,
                        T* running_mean, T* running_var, std::int64_t n, std::int64_t c,
                        std::int64_t hw, T eps, T momentum, bool training);
template <typename T>
void batch_norm_backward(const T* x, const T* gamma, const T* mean, const T* invstd, const T* dy,
                         T* dx, T* dgamma, T* dbeta, std::int64_t n, std::int64_t c,
                         std::int64_t hw, bool training);
}  // namespace cpu

class BatchNorm2d : public ParamLayer {
 public:
  struct Config {
    std::int64_t channels = 0;
    float eps = 1e-5f;
    float momentum = 0.1f;
  };
  BatchNorm2d(std::string prefix, Config config);

  void forward(const Tensor& x, const Tensor& y, bool training);
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const;

  Tensor running_mean() const { return state(0); }
  Tensor running_var() const { return state(1); }
  std::size_t cache_bytes() const { return state_.size(); }

 private:
  Tensor state(int i) const {
    return Tensor(state_.as<float>() + i * config_.channels, DType::kF32, {config_.channels});
  }
  void check_x(const Tensor& x, const char* what) const;
  Config config_;
  int gamma_ = -1, beta_ = -1;
  Buffer state_;  // running_mean, running_var, save_mean, save_invstd: [C] each
  bool last_training_ = true;
};

}  // namespace sparq
