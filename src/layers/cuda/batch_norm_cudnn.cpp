#include "layers/cuda/batch_norm_cudnn.h"

#include <utility>

namespace sparq::cuda {

namespace {
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;
}

BatchNormCudnn::BatchNormCudnn(std::string name, std::int64_t channels, float eps, float momentum)
    : name_(std::move(name)),
      channels_(channels),
      // The CPU computes in double with these same values (float widened exactly).
      eps_(static_cast<double>(eps)),
      momentum_(static_cast<double>(momentum)),
      stats_(nchw_descriptor(1, channels, 1, 1, name_.c_str())) {}

cudnnTensorDescriptor_t BatchNormCudnn::x_desc(std::int64_t n, std::int64_t h, std::int64_t w) {
  const std::array<std::int64_t, 3> key{n, h, w};
  auto it = x_descs_.find(key);
  if (it == x_descs_.end()) {
    it = x_descs_.emplace(key, nchw_descriptor(n, channels_, h, w, name_.c_str())).first;
  }
  return it->second.get();
}

void BatchNormCudnn::forward_training(const DeviceResources& res, std::int64_t n, std::int64_t h,
                                      std::int64_t w, const float* x, const float* gamma,
                                      const float* beta, float* y, float* running_mean,
                                      float* running_var, float* save_mean, float* save_invstd) {
  const cudnnTensorDescriptor_t xd = x_desc(n, h, w);
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      res.cudnn.get(), kMode, &one, &zero, xd, x, xd, y, stats_.get(), gamma, beta, momentum_,
      running_mean, running_var, eps_, save_mean, save_invstd));
}

void BatchNormCudnn::forward_inference(const DeviceResources& res, std::int64_t n, std::int64_t h,
                                       std::int64_t w, const float* x, const float* gamma,
                                       const float* beta, float* y, const float* running_mean,
                                       const float* running_var) {
  const cudnnTensorDescriptor_t xd = x_desc(n, h, w);
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnBatchNormalizationForwardInference(res.cudnn.get(), kMode, &one, &zero, xd, x,
                                                      xd, y, stats_.get(), gamma, beta,
                                                      running_mean, running_var, eps_));
}

void BatchNormCudnn::backward_training(const DeviceResources& res, std::int64_t n, std::int64_t h,
                                       std::int64_t w, const float* x, const float* dy,
                                       const float* gamma, const float* save_mean,
                                       const float* save_invstd, float* dx, float* dgamma,
                                       float* dbeta) {
  const cudnnTensorDescriptor_t xd = x_desc(n, h, w);
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnBatchNormalizationBackward(res.cudnn.get(), kMode, &one, &zero, &one, &one, xd,
                                              x, xd, dy, xd, dx, stats_.get(), gamma, dgamma, dbeta,
                                              eps_, save_mean, save_invstd));
}

}  // namespace sparq::cuda
