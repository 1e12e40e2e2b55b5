// Deterministic reductions shared by the layer kernels (device code: include from .cu files
// only). Every reduction combines its values in a FIXED order: a thread's strided loop, then
// a warp butterfly, then one warp over the per-warp results. The order depends only on the
// launch shape, never on timing, so the same inputs give the same bits on every run; no
// float atomics anywhere.
//
//   block_reduce(v, op, identity): every thread of the block calls it and gets the result.
//   column_sums_accumulate(term, rows, cols, partial, out, stream): out[j] += sum over r of
//     term(r, j), in two passes (fixed row chunks into `partial`, then the chunks in order),
//     so a [rows, cols] reduction down the rows keeps the whole GPU busy.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace sparq::cuda {

constexpr int kWarpSize = 32;

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
// std::max's rule (a < b ? b : a), as the CPU kernels use.
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
struct MinOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};

// Butterfly over the 32 lanes, then lane 0's result to every lane. The butterfly alone gives
// every lane the same value only for a commutative op, and MaxOp is not once a NaN comes in
// (a lane holding NaN keeps it, a lane receiving one drops it): the threads of a row would
// then disagree on its maximum and write a mix of results. The broadcast makes them agree.
template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return __shfl_sync(0xffffffffu, v, 0);
}

// blockDim.x must be a multiple of 32 (at most 1024), and every thread must call it.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T per_warp[kWarpSize];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call's readers are done with per_warp
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  v = lane < warps ? per_warp[lane] : identity;
  return warp_reduce(v, op);  // every warp reduces the same values in the same order
}

// term(r, j) = m[r * cols + j]: plain column sums of a row-major matrix.
struct MatrixEntry {
  const float* m;
  std::int64_t cols;
  __device__ float operator()(std::int64_t r, std::int64_t j) const { return m[r * cols + j]; }
};

// At most this many row chunks, each of at least kMinRowsPerChunk rows: the scratch a
// column reduction needs is bounded by kMaxColumnChunks * cols floats whatever the rows.
constexpr std::int64_t kMaxColumnChunks = 64;
constexpr std::int64_t kMinRowsPerChunk = 32;
constexpr int kColumnThreads = 128;

inline std::size_t column_sums_scratch_floats(std::int64_t cols) {
  return static_cast<std::size_t>(kMaxColumnChunks * cols);
}

template <typename Term>
__global__ void column_partial_sums_kernel(Term term, std::int64_t rows, std::int64_t cols,
                                           std::int64_t rows_per_chunk, float* partial) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float s = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r) s += term(r, j);
  partial[static_cast<std::int64_t>(blockIdx.y) * cols + j] = s;
}

// static: one copy per .cu file that includes this header (no relocatable device code).
static __global__ void column_sums_finish_kernel(const float* partial, std::int64_t chunks,
                                                 std::int64_t cols, float* out) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float s = 0.0f;
  for (std::int64_t c = 0; c < chunks; ++c) s += partial[c * cols + j];
  out[j] += s;  // Note [Gradient rule]: parameter gradients accumulate
}

// partial: column_sums_scratch_floats(cols) device floats. Enqueues on `stream`.
template <typename Term>
void column_sums_accumulate(Term term, std::int64_t rows, std::int64_t cols, float* partial,
                            float* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  std::int64_t chunks = (rows + kMinRowsPerChunk - 1) / kMinRowsPerChunk;
  if (chunks > kMaxColumnChunks) chunks = kMaxColumnChunks;
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;  // no empty chunk at the end
  const dim3 grid(static_cast<unsigned>((cols + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(chunks));
  column_partial_sums_kernel<<<grid, kColumnThreads, 0, stream>>>(term, rows, cols,
                                                                  rows_per_chunk, partial);
  CUDA_CHECK(cudaGetLastError());
  column_sums_finish_kernel<<<grid.x, kColumnThreads, 0, stream>>>(partial, chunks, cols, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
