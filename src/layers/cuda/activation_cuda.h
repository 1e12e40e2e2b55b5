// CUDA implementations of the elementwise activations (layers/activation.h), Note [Layer
// dispatch]: flat device arrays of n floats, enqueued on `stream`, never synced. Aliasing as
// on the CPU: forward may run in place (y == x), backward may write dx == dy. fmt-free.
//
// ReLU is exact, so it equals the CPU bit for bit. GELU evaluates gelu_math.h's expressions
// on the device's expf/erff (the CPU's float loops use vector_math.h's tanh/erf, within
// 6e-7 absolute), Tanh the device's tanhf; both differ from the CPU by a few 1e-7
// (device libm, the CPU's approximations, fma contraction).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "layers/gelu_math.h"

namespace sparq::cuda {

void relu_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream);
// dx = y > 0 ? dy : 0 (reads the forward output y).
void relu_backward(const float* y, const float* dy, float* dx, std::int64_t n, cudaStream_t stream);

void gelu_forward(GeluKind kind, const float* x, float* y, std::int64_t n, cudaStream_t stream);
// Reads the forward input x.
void gelu_backward(GeluKind kind, const float* x, const float* dy, float* dx, std::int64_t n,
                   cudaStream_t stream);

void tanh_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream);
// dx = dy * (1 - y^2) (reads the forward output y).
void tanh_backward(const float* y, const float* dy, float* dx, std::int64_t n, cudaStream_t stream);

}  // namespace sparq::cuda
