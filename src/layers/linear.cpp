#include "layers/linear.h"

#include <algorithm>

#include "core/check.h"
#include "core/profile.h"
#include "layers/matmul.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#include "layers/cuda/linear_cuda.h"
#endif

namespace sparq {
namespace cpu {

template <typename T>
void linear_forward(const T* x, const T* w, const T* b, T* y, std::int64_t n, std::int64_t in,
                    std::int64_t out) {
  matmul<T>(GemmShape{false, true, n, out, in}, T(1), x, w, T(0), y);
  if (b == nullptr) return;
#pragma omp parallel for schedule(static) if (n * out > 32768)
  for (std::int64_t i = 0; i < n; ++i) {
    T* row = y + i * out;
    for (std::int64_t j = 0; j < out; ++j) row[j] += b[j];
  }
}

template <typename T>
void linear_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::int64_t n,
                     std::int64_t in, std::int64_t out) {
  if (dx != nullptr) matmul<T>(GemmShape{false, false, n, in, out}, T(1), dy, w, T(0), dx);
  // dW += dY^T X: the beta = 1 product is the accumulation Note [Gradient rule] asks for.
  if (dw != nullptr) matmul<T>(GemmShape{true, false, out, in, n}, T(1), dy, x, T(1), dw);
  if (db != nullptr) add_column_sums(dy, db, n, out);
}

template <typename T>
void add_column_sums(const T* dy, T* db, std::int64_t n, std::int64_t cols) {
  // Column sums split by column ranges, so threads never share an output element and the
  // summation order is fixed.
#pragma omp parallel for schedule(static) if (n * cols > 32768)
  for (std::int64_t j0 = 0; j0 < cols; j0 += 64) {
    const std::int64_t j1 = std::min(cols, j0 + 64);
    for (std::int64_t i = 0; i < n; ++i) {
      const T* row = dy + i * cols;
      for (std::int64_t j = j0; j < j1; ++j) db[j] += row[j];
    }
  }
}

template void add_column_sums<float>(const float*, float*, std::int64_t, std::int64_t);
template void add_column_sums<double>(const double*, double*, std::int64_t, std::int64_t);

template void linear_forward<float>(const float*, const float*, const float*, float*,
                                    std::int64_t, std::int64_t, std::int64_t);
template void linear_forward<double>(const double*, const double*, const double*, double*,
                                     std::int64_t, std::int64_t, std::int64_t);
template void linear_backward<float>(const float*, const float*, const float*, float*, float*,
                                     float*, std::int64_t, std::int64_t, std::int64_t);
template void linear_backward<double>(const double*, const double*, const double*, double*,
                                      double*, double*, std::int64_t, std::int64_t, std::int64_t);

}  // namespace cpu

Linear::Linear(std::string prefix, Config config) : ParamLayer(std::move(prefix)), config_(config) {
  SPARQ_CHECK(config_.in > 0 && config_.out > 0, "{}: Linear needs in > 0 and out > 0, got {}x{}",
              name(), config_.in, config_.out);
  w_ = params_.add("weight", {config_.out, config_.in}, Init::normal(config_.init_std), true);
  if (config_.bias) b_ = params_.add("bias", {config_.out}, Init::zeros(), false);
}

void Linear::forward(const Tensor& x, const Tensor& y) const {
  SPARQ_PROFILE_SCOPE("linear.forward");  // Note [Profile scopes]
  const std::int64_t n = check_rows(x, config_.in, name(), "x", device());
  SPARQ_CHECK(check_rows(y, config_.out, name(), "y", device()) == n,
              "{}: x {} and y {} differ in rows", name(), x.shape().str(), y.shape().str());
  const float* w = params_.param(w_).data<float>();
  const float* b = b_ >= 0 ? params_.param(b_).data<float>() : nullptr;
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::linear_forward(context().cuda(), x.data<float>(), w, b, y.data<float>(), n,
                         config_.in, config_.out);
#endif
  } else {
    cpu::linear_forward<float>(x.data<float>(), w, b, y.data<float>(), n, config_.in,
                               config_.out);
  }
}

void Linear::backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("linear.backward");  // Note [Profile scopes]
  const std::int64_t n = check_rows(x, config_.in, name(), "x", device());
  SPARQ_CHECK(check_rows(dy, config_.out, name(), "dy", device()) == n,
              "{}: x {} and dy {} differ in rows", name(), x.shape().str(), dy.shape().str());
  float* dx_ptr = nullptr;
  if (!dx.empty()) {
    SPARQ_CHECK(check_rows(dx, config_.in, name(), "dx", device()) == n,
                "{}: dx {} does not match x {}", name(), dx.shape().str(), x.shape().str());
    dx_ptr = dx.data<float>();
  }
  const float* w = params_.param(w_).data<float>();
  float* dw = params_.grad(w_).data<float>();
  float* db = b_ >= 0 ? params_.grad(b_).data<float>() : nullptr;
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::linear_backward(context().cuda(), x.data<float>(), w, dy.data<float>(), dx_ptr, dw,
                          db, n, config_.in, config_.out);
#endif
  } else {
    cpu::linear_backward<float>(x.data<float>(), w, dy.data<float>(), dx_ptr, dw, db, n,
                                config_.in, config_.out);
  }
}

}  // namespace sparq
