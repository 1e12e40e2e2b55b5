// GELU's per-element math, written once for the CPU loops (layers/activation.cpp) and the
// CUDA kernels (layers/cuda/activation.cu), Note [Layer dispatch]. Free of fmt and of
// sparq's tensors so nvcc compiles it.
//
// The CPU's float loops evaluate the same formulas with vector_math.h's tanh/erf/exp (which
// vectorize; activation.cpp), its double loops and the device these expressions. The sides
// differ by a few 1e-7 (the approximations, the device's expf/erff, fma contraction); the
// CUDA tests bound that difference.
#pragma once

#include <cmath>
#include <numbers>

#include "core/host_device.h"

namespace sparq {

enum class GeluKind { kTanh, kErf };

namespace gelu_math {

// sqrt(2 / pi), 1 / sqrt(2) and 1 / sqrt(2 pi), each rounded once to T (the compilers fold
// them to constants; both round sqrt correctly, so host and device get the same bits).
template <typename T>
SPARQ_HOST_DEVICE inline T k_tanh() {
  return std::sqrt(T(2) / std::numbers::pi_v<T>);
}
template <typename T>
SPARQ_HOST_DEVICE inline T k_erf() {
  return T(1) / std::numbers::sqrt2_v<T>;
}
template <typename T>
SPARQ_HOST_DEVICE inline T k_pdf() {
  return T(1) / std::sqrt(T(2) * std::numbers::pi_v<T>);
}

// tanh through one exp: about three times cheaper than std::tanh for float, and exact to a
// few ulps of 1 (an absolute error, which is all GELU's 0.5 * x * (1 + t) can see).
template <typename T>
SPARQ_HOST_DEVICE inline T fast_tanh(T u) {
  return T(1) - T(2) / (std::exp(T(2) * u) + T(1));
}

}  // namespace gelu_math

// GPT-2's tanh approximation: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))).
template <typename T>
SPARQ_HOST_DEVICE inline T gelu_tanh(T v) {
  return T(0.5) * v *
         (T(1) + gelu_math::fast_tanh(gelu_math::k_tanh<T>() * (v + T(0.044715) * v * v * v)));
}

// dy * d gelu_tanh / dv.
template <typename T>
SPARQ_HOST_DEVICE inline T gelu_tanh_grad(T v, T dy) {
  const T k = gelu_math::k_tanh<T>();
  const T t = gelu_math::fast_tanh(k * (v + T(0.044715) * v * v * v));
  const T dinner = k * (T(1) + T(3) * T(0.044715) * v * v);
  return dy * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * dinner);
}

// BERT's exact form: v Phi(v) = 0.5 v (1 + erf(v / sqrt(2))).
template <typename T>
SPARQ_HOST_DEVICE inline T gelu_erf(T v) {
  return T(0.5) * v * (T(1) + std::erf(v * gelu_math::k_erf<T>()));
}

// dy * (Phi(v) + v phi(v)).
template <typename T>
SPARQ_HOST_DEVICE inline T gelu_erf_grad(T v, T dy) {
  return dy * (T(0.5) * (T(1) + std::erf(v * gelu_math::k_erf<T>())) +
               v * gelu_math::k_pdf<T>() * std::exp(T(-0.5) * v * v));
}

}  // namespace sparq
