// Launch geometry and elementwise kernel templates shared by the dense layers' CUDA kernels
// (linear, embedding, residual, activation, dropout .cu files): fixed-size blocks and a
// capped grid that the kernels' grid-stride loops cover, so any element count launches a
// valid grid. nvcc-only (it defines kernels); fmt-free.
#pragma once

#include <cstdint>

#include "core/cuda/cuda_check.h"

namespace sparq::cuda::dense {

constexpr int kThreads = 256;

// Blocks for `n` independent work items of one thread each (at least one block).
inline unsigned int blocks_for(std::int64_t n) {
  constexpr std::int64_t kMaxBlocks = 65535 * 8;  // grid-stride loops cover the rest
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(b < 1 ? 1 : (b < kMaxBlocks ? b : kMaxBlocks));
}

// The grid-stride loop's first index and stride, in 64 bits so n may exceed 2^31.
__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// out[i] = op(a[i]) and out[i] = op(a[i], b[i]) for i in [0, n). Each element is read and
// written by one thread, so out may alias a or b (in-place activations, residual joins).
template <typename Op>
__global__ void unary_kernel(const float* a, float* out, std::int64_t n, Op op) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = op(a[i]);
}

template <typename Op>
__global__ void binary_kernel(const float* a, const float* b, float* out, std::int64_t n, Op op) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = op(a[i], b[i]);
}

template <typename Op>
void launch_unary(const float* a, float* out, std::int64_t n, Op op, cudaStream_t stream) {
  if (n == 0) return;
  unary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, out, n, op);
  CUDA_CHECK(cudaGetLastError());
}

template <typename Op>
void launch_binary(const float* a, const float* b, float* out, std::int64_t n, Op op,
                   cudaStream_t stream) {
  if (n == 0) return;
  binary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n, op);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda::dense
