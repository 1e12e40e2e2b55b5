#include "layers/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/profile.h"

#if SPARQ_HAS_CUDA
#include "layers/cuda/layer_norm_cuda.h"
#endif

namespace sparq {
namespace cpu {

template <typename T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                        std::int64_t rows, std::int64_t c, T eps) {
#pragma omp parallel for schedule(static) if (rows * c > 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * c;
    // Two passes (mean, then centred squares) in double: no cancellation for large means.
    double sum = 0;
    for (std::int64_t j = 0; j < c; ++j) sum += xr[j];
    const double mu = sum / static_cast<double>(c);
    double sq = 0;
    for (std::int64_t j = 0; j < c; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
    const T rs = static_cast<T>(1.0 / std::sqrt(sq / static_cast<double>(c) + eps));
    const T m = static_cast<T>(mu);
    T* yr = y + r * c;
    for (std::int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - m) * rs * gamma[j] + beta[j];
    mean[r] = m;
    rstd[r] = rs;
  }
}

template <typename T>
void layer_norm_backward(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy,
                         T* dx, T* dgamma, T* dbeta, std::int64_t rows, std::int64_t c) {
  const bool par = rows * c > 32768;
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), with g = dy * gamma.
#pragma omp parallel for schedule(static) if (par)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * c;
    const T* dyr = dy + r * c;
    const T m = mean[r], rs = rstd[r];
    T sum_g = 0, sum_gx = 0;
    for (std::int64_t j = 0; j < c; ++j) {
      const T g = dyr[j] * gamma[j];
      sum_g += g;
      sum_gx += g * (xr[j] - m) * rs;
    }
    const T inv_c = T(1) / static_cast<T>(c);
    sum_g *= inv_c;
    sum_gx *= inv_c;
    T* dxr = dx + r * c;
    for (std::int64_t j = 0; j < c; ++j) {
      const T xhat = (xr[j] - m) * rs;
      dxr[j] = rs * (dyr[j] * gamma[j] - sum_g - xhat * sum_gx);
    }
  }
  // Parameter gradients by column blocks: each thread owns its columns, order is fixed.
#pragma omp parallel for schedule(static) if (par)
  for (std::int64_t j0 = 0; j0 < c; j0 += 64) {
    const std::int64_t j1 = std::min(c, j0 + 64);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * c;
      const T* dyr = dy + r * c;
      const T m = mean[r], rs = rstd[r];
      for (std::int64_t j = j0; j < j1; ++j) {
        dgamma[j] += dyr[j] * (xr[j] - m) * rs;
        dbeta[j] += dyr[j];
      }
    }
  }
}

template void layer_norm_forward<float>(const float*, const float*, const float*, float*, float*,
                                        float*, std::int64_t, std::int64_t, float);
template void layer_norm_forward<double>(const double*, const double*, const double*, double*,
                                         double*, double*, std::int64_t, std::int64_t, double);
template void layer_norm_backward<float>(const float*, const float*, const float*, const float*,
                                         const float*, float*, float*, float*, std::int64_t,
                                         std::int64_t);
template void layer_norm_backward<double>(const double*, const double*, const double*,
                                          const double*, const double*, double*, double*,
                                          double*, std::int64_t, std::int64_t);

}  // namespace cpu

LayerNorm::LayerNorm(std::string prefix, Config config)
    : ParamLayer(std::move(prefix)), config_(config) {
  SPARQ_CHECK(config_.dim > 0 && config_.max_rows > 0,
              "{}: LayerNorm needs dim > 0 and max_rows > 0, got dim {} max_rows {}", name(),
              config_.dim, config_.max_rows);
  SPARQ_CHECK(config_.eps > 0.0f, "{}: eps must be positive, got {}", name(), config_.eps);
  gamma_ = params_.add("weight", {config_.dim}, Init::ones(), false);
  beta_ = params_.add("bias", {config_.dim}, Init::zeros(), false);
  cache_ = allocate_cache();
}

void LayerNorm::bind(const ParamStore& store) {
  ParamLayer::bind(store);
  if (cache_.device() != device()) cache_ = allocate_cache();
}

Buffer LayerNorm::allocate_cache() const {
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    const std::size_t floats =
        2 * config_.max_rows + cuda::layer_norm_backward_scratch_floats(config_.dim);
    return Buffer::device(floats * sizeof(float), true);
#endif
  }
  return Buffer::host(2 * config_.max_rows * sizeof(float), true);
}

void LayerNorm::forward(const Tensor& x, const Tensor& y) {
  SPARQ_PROFILE_SCOPE("layer_norm.forward");  // Note [Profile scopes]
  const std::int64_t rows = check_rows(x, config_.dim, name(), "x", device());
  SPARQ_CHECK(rows <= config_.max_rows, "{}: x {} has {} rows, the cache holds {}", name(),
              x.shape().str(), rows, config_.max_rows);
  SPARQ_CHECK(check_rows(y, config_.dim, name(), "y", device()) == rows && y.raw() != x.raw(),
              "{}: y {} must match x {} and not alias it", name(), y.shape().str(), x.shape().str());
  SPARQ_CHECK(cache_.device() == device(), "{}: the cache is on {}, bind() to a {} store first",
              name(), device_name(cache_.device()), device_name(device()));
  rows_ = rows;
  float* mean = cache_.as<float>();
  const float* gamma = params_.param(gamma_).data<float>();
  const float* beta = params_.param(beta_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::layer_norm_forward(x.data<float>(), gamma, beta, y.data<float>(), mean,
                             mean + config_.max_rows, rows, config_.dim, config_.eps, stream());
#endif
  } else {
    cpu::layer_norm_forward<float>(x.data<float>(), gamma, beta, y.data<float>(), mean,
                                   mean + config_.max_rows, rows, config_.dim, config_.eps);
  }
}

void LayerNorm::backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("layer_norm.backward");  // Note [Profile scopes]
  const std::int64_t rows = check_rows(x, config_.dim, name(), "x", device());
  SPARQ_CHECK(rows == rows_, "{}: backward on {} rows after a forward on {}", name(), rows, rows_);
  SPARQ_CHECK(check_rows(dy, config_.dim, name(), "dy", device()) == rows,
              "{}: dy {} does not match x {}", name(), dy.shape().str(), x.shape().str());
  SPARQ_CHECK(check_rows(dx, config_.dim, name(), "dx", device()) == rows && dx.raw() != dy.raw(),
              "{}: dx {} must match x and not alias dy", name(), dx.shape().str());
  const float* mean = cache_.as<float>();
  const float* gamma = params_.param(gamma_).data<float>();
  float* dgamma = params_.grad(gamma_).data<float>();
  float* dbeta = params_.grad(beta_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::layer_norm_backward(x.data<float>(), gamma, mean, mean + config_.max_rows,
                              dy.data<float>(), dx.data<float>(), dgamma, dbeta,
                              cache_.as<float>() + 2 * config_.max_rows, rows, config_.dim,
                              stream());
#endif
  } else {
    cpu::layer_norm_backward<float>(x.data<float>(), gamma, mean, mean + config_.max_rows,
                                    dy.data<float>(), dx.data<float>(), dgamma, dbeta, rows,
                                    config_.dim);
  }
}

}  // namespace sparq
