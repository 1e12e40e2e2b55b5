// BatchNorm2d on cuDNN (CUDNN_BATCHNORM_SPATIAL: statistics per channel over N, H, W): the
// training forward with the running-statistics update, the eval forward, and the training
// backward. Only compiled with cuDNN; used by layers/batch_norm.cpp, which also runs the two
// eval-mode kernels cuDNN lacks (layers/cuda/batch_norm_cuda.h).
//
// Conventions, the CPU's (layers/batch_norm.h): the batch is normalised with the BIASED
// variance; running <- (1 - momentum) * running + momentum * batch, cuDNN's
// exponentialAverageFactor being the momentum and its running variance taking the UNBIASED
// batch variance; the saved mean and inverse std (1 / sqrt(var + eps)) are the backward's
// cache. cuDNN's batch norm is deterministic (it is not among the routines its documentation
// lists as non-reproducible), and SPATIAL, unlike SPATIAL_PERSISTENT, makes no assumption on
// the range of the inputs.
//
// Descriptors: the [1, C, 1, 1] statistics descriptor is made once; the x descriptor once per
// (n, h, w) the layer sees (cached).
//
// Gradients: see Note [Gradient rule] (layers/param_set.h): dx is written with beta = 0,
// dgamma and dbeta accumulate with beta = 1.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "core/cuda/device_resources.h"
#include "layers/cuda/cudnn_descriptors.h"

namespace sparq::cuda {

class BatchNormCudnn {
 public:
  BatchNormCudnn(std::string name, std::int64_t channels, float eps, float momentum);

  // x, y [n, C, h, w]; gamma, beta and the four statistics [C]. Updates the running ones and
  // writes the batch mean and inverse std into save_mean / save_invstd.
  void forward_training(const DeviceResources& res, std::int64_t n, std::int64_t h, std::int64_t w,
                        const float* x, const float* gamma, const float* beta, float* y,
                        float* running_mean, float* running_var, float* save_mean,
                        float* save_invstd);
  // Normalises with the running statistics (left unchanged).
  void forward_inference(const DeviceResources& res, std::int64_t n, std::int64_t h, std::int64_t w,
                         const float* x, const float* gamma, const float* beta, float* y,
                         const float* running_mean, const float* running_var);
  // The backward of forward_training, from its saved mean and inverse std: dx overwritten,
  // dgamma and dbeta accumulated.
  void backward_training(const DeviceResources& res, std::int64_t n, std::int64_t h, std::int64_t w,
                         const float* x, const float* dy, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta);

 private:
  cudnnTensorDescriptor_t x_desc(std::int64_t n, std::int64_t h, std::int64_t w);

  std::string name_;
  std::int64_t channels_;
  double eps_, momentum_;
  TensorDescriptor stats_;                                           // [1, C, 1, 1]
  std::map<std::array<std::int64_t, 3>, TensorDescriptor> x_descs_;  // by (n, h, w)
};

}  // namespace sparq::cuda
