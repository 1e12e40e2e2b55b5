// CUDA LayerNorm (the device twin of cpu::layer_norm_* in layers/layer_norm.h): raw device
// pointers, enqueued on `stream`, never synchronised. Free of fmt (nvcc compiles the .cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace sparq::cuda {

// One warp per row; mean and variance in double, two passes, as on the CPU.
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, std::int64_t rows, std::int64_t c, float eps,
                        cudaStream_t stream);

// Device floats the backward needs as `scratch` for the parameter-gradient reduction.
std::size_t layer_norm_backward_scratch_floats(std::int64_t c);

// dx [rows, c] overwritten; dgamma, dbeta [c] += by a fixed-order reduction over the rows.
void layer_norm_backward(const float* x, const float* gamma, const float* mean,
                         const float* rstd, const float* dy, float* dx, float* dgamma,
                         float* dbeta, float* scratch, std::int64_t rows, std::int64_t c,
                         cudaStream_t stream);

}  // namespace sparq::cuda
