// CUDA implementation of Linear (layers/linear.h), Note [Layer dispatch]: the same math as
// cpu::linear_forward/backward on device pointers, enqueued on `stream`, never synced.
// `blas` must be bound to `stream` (an ExecContext's handle is). fmt-free for nvcc.
//
// Products go through cuda::gemm with the CPU's row-major GemmShapes, so they differ from the
// CPU only by summation order. The bias gradient is summed in the CPU's order (rows
// ascending onto the old db[j]), so it is bit-identical to the CPU's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/cuda/cuda_handles.h"

namespace sparq::cuda {

// x [n, in], w [out, in], b [out] or null, y [n, out] (overwritten, not read).
void linear_forward(const CublasHandle& blas, const float* x, const float* w, const float* b,
                    float* y, std::int64_t n, std::int64_t in, std::int64_t out,
                    cudaStream_t stream);

// dx [n, in] overwritten (skipped when null); dw [out, in] and db [out] (when non-null) +=.
void linear_backward(const CublasHandle& blas, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, std::int64_t n, std::int64_t in,
                     std::int64_t out, cudaStream_t stream);

}  // namespace sparq::cuda
