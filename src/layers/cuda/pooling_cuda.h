// Launchers of the pooling kernels (layers/cuda/pooling.cu), the device twins of the cpu::
// pooling functions in layers/pooling.h. Raw device pointers, NCHW planes laid out as PoolGeom
// says; each call only enqueues on `stream` (Note [Layer dispatch]). Free of fmt: nvcc
// compiles it. The per-cell math is layers/cuda/pooling_windows.h, shared with the CPU, so the
// results are bit-identical to the CPU's (that header says why).
//
// Gradients: the input gradients are overwritten (Note [Gradient rule], layers/param_set.h);
// the kernels gather per input pixel, so they need neither atomics nor a zeroing pass.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "layers/cuda/pooling_windows.h"

namespace sparq::cuda {

// y and argmax: g.planes * g.out_h * g.out_w; argmax indexes each H*W plane.
void max_pool_forward(const PoolGeom& g, const float* x, float* y, std::int32_t* argmax,
                      cudaStream_t stream);
// dx: g.planes * g.h * g.w, overwritten.
void max_pool_backward(const PoolGeom& g, const std::int32_t* argmax, const float* dy, float* dx,
                       cudaStream_t stream);
void avg_pool_forward(const PoolGeom& g, const float* x, float* y, cudaStream_t stream);
void avg_pool_backward(const PoolGeom& g, const float* dy, float* dx, cudaStream_t stream);

}  // namespace sparq::cuda
