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
//
// Devices (Note [Layer dispatch], layers/param_set.h): on CUDA the training forward and
// backward and the eval forward run on cuDNN (layers/cuda/batch_norm_cudnn.h, the CPU's
// momentum and variance conventions), the eval-mode cache and backward on sparq's kernels
// (layers/cuda/batch_norm_cuda.h). The running statistics and the cache live on the layer's
// device: bind() (which hides ParamLayer::bind) moves them to the store's device, keeping
// their values, and running_mean() / running_var() are then device tensors, so Model::state()
// still reaches them. On CUDA a training batch needs n * h * w > 1 (cuDNN divides by the
// count minus one); a CUDA build without cuDNN refuses device tensors naming the layer.
#pragma once

#include <memory>

#include "core/buffer.h"
#include "layers/param_set.h"

namespace sparq {

namespace cuda {
class BatchNormCudnn;  // layers/cuda/batch_norm_cudnn.h, only with cuDNN
}

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
  ~BatchNorm2d();
  BatchNorm2d(BatchNorm2d&&) noexcept;
  BatchNorm2d& operator=(BatchNorm2d&&) noexcept;

  // Hides ParamLayer::bind: also moves the statistics to the store's device (values kept).
  void bind(const ParamStore& store);

  void forward(const Tensor& x, const Tensor& y, bool training);
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const;

  // [C] views on the layer's device (where the statistics live).
  Tensor running_mean() const { return state(kRunningMean); }
  Tensor running_var() const { return state(kRunningVar); }
  std::size_t cache_bytes() const { return state_.size(); }

 private:
  enum Slot { kRunningMean, kRunningVar, kSaveMean, kSaveInvstd };
  float* slot(Slot i) const { return state_.as<float>() + i * stride_; }
  Tensor state(Slot i) const {
    return Tensor(slot(i), DType::kF32, {config_.channels}, state_.device());
  }
  void check_x(const Tensor& x, const char* what) const;
  // Fatal unless the statistics are on the context's device (bind() through this class).
  void check_state_device() const;
  Config config_;
  int gamma_ = -1, beta_ = -1;
  // The four [C] slots, each starting on a 256-byte boundary (stride_ floats apart).
  std::int64_t stride_ = 0;
  Buffer state_;
  bool last_training_ = true;
  std::unique_ptr<cuda::BatchNormCudnn> cudnn_;  // made by bind() to a CUDA store
};

}  // namespace sparq
