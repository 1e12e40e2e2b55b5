#include "layers/activation.h"

#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "core/element_blocks.h"
#include "core/profile.h"
#include "layers/relu_math.h"
#include "layers/vector_math.h"

#if SPARQ_HAS_CUDA
#include "layers/cuda/activation_cuda.h"
#endif

namespace sparq {
namespace cpu {

// Elementwise loops only pay for a parallel region on large tensors; they run in fixed blocks
// so that no result depends on the thread count (Note [Elementwise loops in fixed blocks],
// core/element_blocks.h).
constexpr std::int64_t kParallelMin = 1 << 15;

template <typename T>
void relu_forward(const T* x, T* y, std::int64_t n) {
  for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
    for (std::int64_t i = begin; i < end; ++i) y[i] = relu_math::forward(x[i]);
  });
}

template <typename T>
void relu_backward(const T* y, const T* dy, T* dx, std::int64_t n) {
  for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
    for (std::int64_t i = begin; i < end; ++i) dx[i] = relu_math::backward(y[i], dy[i]);
  });
}

// GELU on float CPU data: gelu_math.h's formulas with vector_math.h's tanh/erf/exp, so the
// loops vectorize (std::tanh/erf/exp are scalar library calls). The double instantiation
// (the finite-difference tests) and the CUDA kernels evaluate gelu_math.h's expressions.
namespace {
float gelu_tanh_vec(float v) {
  const float k = gelu_math::k_tanh<float>();
  return 0.5f * v * (1.0f + tanh_approx(k * (v + 0.044715f * v * v * v)));
}
float gelu_tanh_grad_vec(float v, float dy) {
  const float k = gelu_math::k_tanh<float>();
  const float t = tanh_approx(k * (v + 0.044715f * v * v * v));
  const float dinner = k * (1.0f + 3.0f * 0.044715f * v * v);
  return dy * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
}
float gelu_erf_vec(float v) { return 0.5f * v * (1.0f + erf_approx(v * gelu_math::k_erf<float>())); }
float gelu_erf_grad_vec(float v, float dy) {
  return dy * (0.5f * (1.0f + erf_approx(v * gelu_math::k_erf<float>())) +
               v * gelu_math::k_pdf<float>() * exp_nonpositive(-0.5f * v * v));
}
}  // namespace

template <typename T>
void gelu_forward(GeluKind kind, const T* x, T* y, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (kind == GeluKind::kTanh) {
      for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) y[i] = gelu_tanh_vec(x[i]);
      });
    } else {
      for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) y[i] = gelu_erf_vec(x[i]);
      });
    }
  } else if (kind == GeluKind::kTanh) {
    for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) y[i] = gelu_tanh(x[i]);
    });
  } else {
    for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) y[i] = gelu_erf(x[i]);
    });
  }
}

template <typename T>
void gelu_backward(GeluKind kind, const T* x, const T* dy, T* dx, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (kind == GeluKind::kTanh) {
      for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) dx[i] = gelu_tanh_grad_vec(x[i], dy[i]);
      });
    } else {
      for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) dx[i] = gelu_erf_grad_vec(x[i], dy[i]);
      });
    }
  } else if (kind == GeluKind::kTanh) {
    for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) dx[i] = gelu_tanh_grad(x[i], dy[i]);
    });
  } else {
    for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) dx[i] = gelu_erf_grad(x[i], dy[i]);
    });
  }
}

template <typename T>
void tanh_forward(const T* x, T* y, std::int64_t n) {
  for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) y[i] = std::tanh(x[i]);
  });
}

template <typename T>
void tanh_backward(const T* y, const T* dy, T* dx, std::int64_t n) {
  for_each_element_block(n, kParallelMin, [&](std::int64_t begin, std::int64_t end) {
#pragma omp simd
    for (std::int64_t i = begin; i < end; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
  });
}

#define SPARQ_INSTANTIATE_ACTIVATIONS(T)                                        \
  template void relu_forward<T>(const T*, T*, std::int64_t);                    \
  template void relu_backward<T>(const T*, const T*, T*, std::int64_t);         \
  template void gelu_forward<T>(GeluKind, const T*, T*, std::int64_t);          \
  template void gelu_backward<T>(GeluKind, const T*, const T*, T*, std::int64_t); \
  template void tanh_forward<T>(const T*, T*, std::int64_t);                    \
  template void tanh_backward<T>(const T*, const T*, T*, std::int64_t);
SPARQ_INSTANTIATE_ACTIVATIONS(float)
SPARQ_INSTANTIATE_ACTIVATIONS(double)
#undef SPARQ_INSTANTIATE_ACTIVATIONS

}  // namespace cpu

std::int64_t check_same_numel(const Tensor& a, const Tensor& b, const std::string& layer,
                              const char* a_name, const char* b_name, Device device) {
  for (const auto& [t, what] : {std::pair{&a, a_name}, std::pair{&b, b_name}}) {
    SPARQ_CHECK(!t->empty() && t->device() == device && t->dtype() == DType::kF32,
                "{}: {} must be a non-empty f32 view on {}, got {}", layer, what,
                device_name(device), t->str());
  }
  SPARQ_CHECK(a.numel() == b.numel(), "{}: {} {} and {} {} differ in size", layer, a_name,
              a.shape().str(), b_name, b.shape().str());
  return a.numel();
}

// Each method checks its tensors on the context's device and runs there (Note [Layer
// dispatch]); the empty CUDA branches are unreachable in a build without CUDA.
void Relu::forward(const Tensor& x, const Tensor& y) const {
  SPARQ_PROFILE_SCOPE("relu.forward");  // Note [Profile scopes]
  const auto n = check_same_numel(x, y, name_, "x", "y", device());
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::relu_forward(x.data<float>(), y.data<float>(), n, stream());
#endif
  } else {
    cpu::relu_forward<float>(x.data<float>(), y.data<float>(), n);
  }
}

void Relu::backward(const Tensor& y, const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("relu.backward");  // Note [Profile scopes]
  const auto n = check_same_numel(y, dy, name_, "y", "dy", device());
  check_same_numel(dy, dx, name_, "dy", "dx", device());
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::relu_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), n, stream());
#endif
  } else {
    cpu::relu_backward<float>(y.data<float>(), dy.data<float>(), dx.data<float>(), n);
  }
}

void Gelu::forward(const Tensor& x, const Tensor& y) const {
  SPARQ_PROFILE_SCOPE("gelu.forward");  // Note [Profile scopes]
  const auto n = check_same_numel(x, y, name_, "x", "y", device());
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::gelu_forward(kind_, x.data<float>(), y.data<float>(), n, stream());
#endif
  } else {
    cpu::gelu_forward<float>(kind_, x.data<float>(), y.data<float>(), n);
  }
}

void Gelu::backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("gelu.backward");  // Note [Profile scopes]
  const auto n = check_same_numel(x, dy, name_, "x", "dy", device());
  check_same_numel(dy, dx, name_, "dy", "dx", device());
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::gelu_backward(kind_, x.data<float>(), dy.data<float>(), dx.data<float>(), n, stream());
#endif
  } else {
    cpu::gelu_backward<float>(kind_, x.data<float>(), dy.data<float>(), dx.data<float>(), n);
  }
}

void Tanh::forward(const Tensor& x, const Tensor& y) const {
  SPARQ_PROFILE_SCOPE("tanh.forward");  // Note [Profile scopes]
  const auto n = check_same_numel(x, y, name_, "x", "y", device());
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::tanh_forward(x.data<float>(), y.data<float>(), n, stream());
#endif
  } else {
    cpu::tanh_forward<float>(x.data<float>(), y.data<float>(), n);
  }
}

void Tanh::backward(const Tensor& y, const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("tanh.backward");  // Note [Profile scopes]
  const auto n = check_same_numel(y, dy, name_, "y", "dy", device());
  check_same_numel(dy, dx, name_, "dy", "dx", device());
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::tanh_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), n, stream());
#endif
  } else {
    cpu::tanh_backward<float>(y.data<float>(), dy.data<float>(), dx.data<float>(), n);
  }
}

}  // namespace sparq
