#include "layers/batch_norm.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/profile.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/sync_copy.h"
#include "layers/cuda/batch_norm_cuda.h"
#endif
#if SPARQ_HAS_CUDNN
#include "core/cuda/device_resources.h"
#include "layers/cuda/batch_norm_cudnn.h"
#else
namespace sparq::cuda {
class BatchNormCudnn {};  // never constructed without cuDNN
}  // namespace sparq::cuda
#endif

namespace sparq {
namespace cpu {

template <typename T>
void batch_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* invstd,
                        T* running_mean, T* running_var, std::int64_t n, std::int64_t c,
                        std::int64_t hw, T eps, T momentum, bool training) {
  const std::int64_t count = n * hw;
#pragma omp parallel for schedule(static) if (n * c * hw > 32768)
  for (std::int64_t ch = 0; ch < c; ++ch) {
    if (training) {
      // Two passes in double, so large activations do not cancel catastrophically.
      double sum = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const T* p = x + (i * c + ch) * hw;
        for (std::int64_t j = 0; j < hw; ++j) sum += p[j];
      }
      const double mu = sum / static_cast<double>(count);
      double sq = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const T* p = x + (i * c + ch) * hw;
        for (std::int64_t j = 0; j < hw; ++j) sq += (p[j] - mu) * (p[j] - mu);
      }
      mean[ch] = static_cast<T>(mu);
      invstd[ch] = static_cast<T>(1.0 / std::sqrt(sq / static_cast<double>(count) + eps));
      const double unbiased = count > 1 ? sq / static_cast<double>(count - 1) : sq;
      running_mean[ch] = static_cast<T>((1 - momentum) * running_mean[ch] + momentum * mu);
      running_var[ch] = static_cast<T>((1 - momentum) * running_var[ch] + momentum * unbiased);
    } else {
      mean[ch] = running_mean[ch];
      invstd[ch] = T(1) / std::sqrt(running_var[ch] + eps);
    }
    const T scale = gamma[ch] * invstd[ch];
    const T shift = beta[ch] - mean[ch] * scale;
    for (std::int64_t i = 0; i < n; ++i) {
      const T* p = x + (i * c + ch) * hw;
      T* q = y + (i * c + ch) * hw;
      for (std::int64_t j = 0; j < hw; ++j) q[j] = p[j] * scale + shift;
    }
  }
}

template <typename T>
void batch_norm_backward(const T* x, const T* gamma, const T* mean, const T* invstd, const T* dy,
                         T* dx, T* dgamma, T* dbeta, std::int64_t n, std::int64_t c,
                         std::int64_t hw, bool training) {
  const T count = static_cast<T>(n * hw);
#pragma omp parallel for schedule(static) if (n * c * hw > 32768)
  for (std::int64_t ch = 0; ch < c; ++ch) {
    const T m = mean[ch], is = invstd[ch];
    T sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const T* p = x + (i * c + ch) * hw;
      const T* d = dy + (i * c + ch) * hw;
      for (std::int64_t j = 0; j < hw; ++j) {
        sum_dy += d[j];
        sum_dy_xhat += d[j] * (p[j] - m) * is;
      }
    }
    dgamma[ch] += sum_dy_xhat;
    dbeta[ch] += sum_dy;
    const T g = gamma[ch] * is;
    // In training the statistics depend on x, which adds the two mean terms.
    const T mean_dy = training ? sum_dy / count : T(0);
    const T mean_dy_xhat = training ? sum_dy_xhat / count : T(0);
    for (std::int64_t i = 0; i < n; ++i) {
      const T* p = x + (i * c + ch) * hw;
      const T* d = dy + (i * c + ch) * hw;
      T* q = dx + (i * c + ch) * hw;
      for (std::int64_t j = 0; j < hw; ++j) {
        q[j] = g * (d[j] - mean_dy - (p[j] - m) * is * mean_dy_xhat);
      }
    }
  }
}

template void batch_norm_forward<float>(const float*, const float*, const float*, float*, float*,
                                        float*, float*, float*, std::int64_t, std::int64_t,
                                        std::int64_t, float, float, bool);
template void batch_norm_forward<double>(const double*, const double*, const double*, double*,
                                         double*, double*, double*, double*, std::int64_t,
                                         std::int64_t, std::int64_t, double, double, bool);
template void batch_norm_backward<float>(const float*, const float*, const float*, const float*,
                                         const float*, float*, float*, float*, std::int64_t,
                                         std::int64_t, std::int64_t, bool);
template void batch_norm_backward<double>(const double*, const double*, const double*,
                                          const double*, const double*, double*, double*,
                                          double*, std::int64_t, std::int64_t, std::int64_t,
                                          bool);

}  // namespace cpu

namespace {

// A copy of `from` on `device` (either way between host and CUDA).
Buffer copy_to_device(const Buffer& from, Device device) {
  Buffer to = device == Device::kCUDA ? Buffer::device(from.size()) : Buffer::host(from.size());
  if (from.device() == Device::kCPU && device == Device::kCPU) {
    std::memcpy(to.data(), from.data(), from.size());
    return to;
  }
#if SPARQ_HAS_CUDA
  // Work queued on any stream may still be writing the old statistics (Note [Synchronous
  // copies and non-blocking streams]).
  cuda::copy_synchronously(to.data(), from.data(), from.size());
#endif
  return to;
}

}  // namespace

BatchNorm2d::BatchNorm2d(std::string prefix, Config config)
    : ParamLayer(std::move(prefix)), config_(config) {
  SPARQ_CHECK(config_.channels > 0, "{}: BatchNorm2d needs channels > 0, got {}", name(),
              config_.channels);
  SPARQ_CHECK(config_.eps > 0.0f && config_.momentum >= 0.0f && config_.momentum <= 1.0f,
              "{}: bad eps {} or momentum {}", name(), config_.eps, config_.momentum);
  gamma_ = params_.add("weight", {config_.channels}, Init::ones(), false);
  beta_ = params_.add("bias", {config_.channels}, Init::zeros(), false);
  // Each slot 256-byte aligned, as the device kernels and cuDNN like their vectors.
  stride_ = (config_.channels + 63) / 64 * 64;
  state_ = Buffer::host(4 * stride_ * sizeof(float), true);
  float* var = slot(kRunningVar);
  for (std::int64_t i = 0; i < config_.channels; ++i) var[i] = 1.0f;
}

BatchNorm2d::~BatchNorm2d() = default;
BatchNorm2d::BatchNorm2d(BatchNorm2d&&) noexcept = default;
BatchNorm2d& BatchNorm2d::operator=(BatchNorm2d&&) noexcept = default;

void BatchNorm2d::bind(const ParamStore& store) {
  ParamLayer::bind(store);
  if (state_.device() != device()) state_ = copy_to_device(state_, device());
  cudnn_.reset();
#if SPARQ_HAS_CUDNN
  if (on_cuda()) {
    cudnn_ = std::make_unique<cuda::BatchNormCudnn>(name(), config_.channels, config_.eps,
                                                    config_.momentum);
  }
#endif
}

void BatchNorm2d::check_x(const Tensor& x, const char* what) const {
  SPARQ_CHECK(x.ndim() == 4, "{}: {} must be NCHW, got {}", name(), what, x.shape().str());
  check_arg(x, {x.dim(0), config_.channels, x.dim(2), x.dim(3)}, name(), what, DType::kF32,
            device());
}

void BatchNorm2d::check_state_device() const {
  SPARQ_CHECK(state_.device() == device(),
              "{}: running statistics are on {} but the layer runs on {}: bind it with "
              "BatchNorm2d::bind, which moves them",
              name(), device_name(state_.device()), device_name(device()));
#if !SPARQ_HAS_CUDNN
  SPARQ_CHECK(!on_cuda(), "{}: BatchNorm2d on CUDA needs cuDNN, and sparq was built without it",
              name());
#endif
}

void BatchNorm2d::forward(const Tensor& x, const Tensor& y, bool training) {
  SPARQ_PROFILE_SCOPE("batch_norm.forward");  // Note [Profile scopes]
  check_x(x, "x");
  check_arg(y, x.shape(), name(), "y", DType::kF32, device());
  check_state_device();
  last_training_ = training;
  const std::int64_t c = config_.channels, n = x.dim(0), h = x.dim(2), w = x.dim(3);
  // Batch statistics of one value are that value: the output would be beta whatever x is,
  // with a zero gradient (PyTorch refuses it too), on both devices alike.
  SPARQ_CHECK(!training || n * h * w > 1,
              "{}: training needs more than one value per channel (batch x height x width), "
              "got x {}",
              name(), x.shape().str());
  const float* gamma = params_.param(gamma_).data<float>();
  const float* beta = params_.param(beta_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDNN
    const cuda::DeviceResources& res = context().cuda();
    if (training) {
      cudnn_->forward_training(res, n, h, w, x.data<float>(), gamma, beta, y.data<float>(),
                               slot(kRunningMean), slot(kRunningVar), slot(kSaveMean),
                               slot(kSaveInvstd));
    } else {
      cudnn_->forward_inference(res, n, h, w, x.data<float>(), gamma, beta, y.data<float>(),
                                slot(kRunningMean), slot(kRunningVar));
      cuda::batch_norm_eval_stats(slot(kRunningMean), slot(kRunningVar), slot(kSaveMean),
                                  slot(kSaveInvstd), c, config_.eps, stream());
    }
#endif
  } else {
    cpu::batch_norm_forward<float>(x.data<float>(), gamma, beta, y.data<float>(), slot(kSaveMean),
                                   slot(kSaveInvstd), slot(kRunningMean), slot(kRunningVar), n, c,
                                   h * w, config_.eps, config_.momentum, training);
  }
}

void BatchNorm2d::backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("batch_norm.backward");  // Note [Profile scopes]
  check_x(x, "x");
  check_arg(dy, x.shape(), name(), "dy", DType::kF32, device());
  check_arg(dx, x.shape(), name(), "dx", DType::kF32, device());
  check_state_device();
  const std::int64_t c = config_.channels, n = x.dim(0), h = x.dim(2), w = x.dim(3);
  const float* gamma = params_.param(gamma_).data<float>();
  float* dgamma = params_.grad(gamma_).data<float>();
  float* dbeta = params_.grad(beta_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDNN
    if (last_training_) {
      cudnn_->backward_training(context().cuda(), n, h, w, x.data<float>(), dy.data<float>(),
                                gamma, slot(kSaveMean), slot(kSaveInvstd), dx.data<float>(),
                                dgamma, dbeta);
    } else {
      cuda::batch_norm_eval_backward(x.data<float>(), gamma, slot(kSaveMean), slot(kSaveInvstd),
                                     dy.data<float>(), dx.data<float>(), dgamma, dbeta, n, c,
                                     h * w, stream());
    }
#endif
  } else {
    cpu::batch_norm_backward<float>(x.data<float>(), gamma, slot(kSaveMean), slot(kSaveInvstd),
                                    dy.data<float>(), dx.data<float>(), dgamma, dbeta, n, c,
                                    h * w, last_training_);
  }
}

}  // namespace sparq
