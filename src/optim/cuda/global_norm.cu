#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "optim/cuda/global_norm_cuda.h"
#include "optim/update_math.h"

namespace sparq::optim::cuda {
namespace {

// The sum of one value per thread of a kNormThreads-thread block, by a fixed halving tree in
// shared memory (the same pairs are added in the same order on every run). The total is
// valid in thread 0.
__device__ double block_sum(double value) {
  __shared__ double lane[kNormThreads];
  lane[threadIdx.x] = value;
  __syncthreads();
  for (int half = kNormThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) lane[threadIdx.x] += lane[threadIdx.x + half];
    __syncthreads();
  }
  return lane[0];
}

// Launched as exactly kNormBlocks x kNormThreads: the partition depends only on n.
__global__ void sum_squares_partials_kernel(const float* __restrict__ x, std::int64_t n,
                                            double* __restrict__ partials) {
  constexpr std::int64_t kStride = std::int64_t{kNormBlocks} * kNormThreads;
  double acc = 0.0;
  for (std::int64_t i = std::int64_t{blockIdx.x} * kNormThreads + threadIdx.x; i < n;
       i += kStride) {
    const double v = x[i];
    acc += v * v;
  }
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// Launched as one block of kNormThreads.
__global__ void finish_norm_kernel(const double* __restrict__ partials, double max_norm,
                                   double* __restrict__ norm, float* __restrict__ scale) {
  double acc = 0.0;
  for (int b = threadIdx.x; b < kNormBlocks; b += kNormThreads) acc += partials[b];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) {
    const double result = sqrt(total);
    *norm = result;
    *scale = clip_scale(result, max_norm);
  }
}

}  // namespace

void global_norm(const float* x, std::int64_t n, double max_norm, double* partials,
                 double* norm, float* scale, cudaStream_t stream) {
  // n == 0 still runs: every partial is 0, so the norm is 0 and the scale 1.
  sum_squares_partials_kernel<<<kNormBlocks, kNormThreads, 0, stream>>>(x, n, partials);
  CUDA_CHECK(cudaGetLastError());
  finish_norm_kernel<<<1, kNormThreads, 0, stream>>>(partials, max_norm, norm, scale);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::optim::cuda
