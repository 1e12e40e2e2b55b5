// CUDA implementation of Linear (layers/linear.h), Note [Layer dispatch]: the same math as
// cpu::linear_forward/backward on device pointers, enqueued on the context's stream, never
// synced. fmt-free for nvcc: the resources are only declared here.
//
// Products go through cuda::layer_gemm (core/cuda/mixed_gemm.h) with the CPU's row-major
// GemmShapes: in f32 they differ from the CPU only by summation order; under bf16 they are
// products of bf16-rounded operands (Note [bf16 GEMM operands]). The bias gradient is a
// deterministic column reduction in fixed row chunks (reduce.cuh), as LayerNorm's dbeta: the
// CPU adds the rows one by one, so the two differ by summation order only. (Summing in the
// CPU's order, one thread per column, kept only `out` threads busy on all rows: a few
// hundred threads for GPT-2's 768-wide projections.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

struct DeviceResources;

// x [n, in], w [out, in], b [out] or null, y [n, out] (overwritten, not read).
void linear_forward(const DeviceResources& device, const float* x, const float* w, const float* b,
                    float* y, std::int64_t n, std::int64_t in, std::int64_t out);

// dx [n, in] overwritten (skipped when null); dw [out, in] and db [out] (when non-null) +=.
void linear_backward(const DeviceResources& device, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, std::int64_t n, std::int64_t in,
                     std::int64_t out);

// The bias kernels (linear.cu): y[i, j] += b[j]; db[j] += sum_i dy[i, j], with `scratch`
// of bias_grad_scratch_floats(out) device floats for the partial sums.
void add_bias(const float* b, float* y, std::int64_t n, std::int64_t out, cudaStream_t stream);
std::size_t bias_grad_scratch_floats(std::int64_t out);
void add_bias_grad(const float* dy, float* db, float* scratch, std::int64_t n, std::int64_t out,
                   cudaStream_t stream);

}  // namespace sparq::cuda
