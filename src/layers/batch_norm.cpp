#include "layers/batch_norm.h"

#include <cmath>

#include "core/check.h"

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

BatchNorm2d::BatchNorm2d(std::string prefix, Config config)
    : ParamLayer(std::move(prefix)), config_(config) {
  SPARQ_CHECK(config_.channels > 0, "{}: BatchNorm2d needs channels > 0, got {}", name(),
              config_.channels);
  SPARQ_CHECK(config_.eps > 0.0f && config_.momentum >= 0.0f && config_.momentum <= 1.0f,
              "{}: bad eps {} or momentum {}", name(), config_.eps, config_.momentum);
  gamma_ = params_.add("weight", {config_.channels}, Init::ones(), false);
  beta_ = params_.add("bias", {config_.channels}, Init::zeros(), false);
  state_ = Buffer::host(4 * config_.channels * sizeof(float), true);
  float* var = state_.as<float>() + config_.channels;
  for (std::int64_t i = 0; i < config_.channels; ++i) var[i] = 1.0f;
}

void BatchNorm2d::check_x(const Tensor& x, const char* what) const {
  SPARQ_CHECK(x.ndim() == 4, "{}: {} must be NCHW, got {}", name(), what, x.shape().str());
  check_arg(x, {x.dim(0), config_.channels, x.dim(2), x.dim(3)}, name(), what);
}

void BatchNorm2d::forward(const Tensor& x, const Tensor& y, bool training) {
  check_x(x, "x");
  check_arg(y, x.shape(), name(), "y");
  last_training_ = training;
  float* s = state_.as<float>();
  const std::int64_t c = config_.channels;
  cpu::batch_norm_forward<float>(x.data<float>(), params_.param(gamma_).data<float>(),
                                 params_.param(beta_).data<float>(), y.data<float>(), s + 2 * c,
                                 s + 3 * c, s, s + c, x.dim(0), c, x.dim(2) * x.dim(3),
                                 config_.eps, config_.momentum, training);
}

void BatchNorm2d::backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const {
  check_x(x, "x");
  check_arg(dy, x.shape(), name(), "dy");
  check_arg(dx, x.shape(), name(), "dx");
  const float* s = state_.as<float>();
  const std::int64_t c = config_.channels;
  cpu::batch_norm_backward<float>(x.data<float>(), params_.param(gamma_).data<float>(), s + 2 * c,
                                  s + 3 * c, dy.data<float>(), dx.data<float>(),
                                  params_.grad(gamma_).data<float>(),
                                  params_.grad(beta_).data<float>(), x.dim(0), c,
                                  x.dim(2) * x.dim(3), last_training_);
}

}  // namespace sparq
