#include <cmath>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/nonfinite_cuda.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__global__ void flag_nonfinite_kernel(const float* g, std::size_t n, std::uint32_t* word) {
  bool bad = false;
  for (std::size_t i = first_index(); i < n; i += stride()) bad = bad || !isfinite(g[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *word = 1;
}

__global__ void flag_nonfinite_sum_kernel(const compress::SpanStats* input, std::uint32_t* word) {
  if (!isfinite(input->sum_a)) *word = 1;
}

__global__ void zero_if_flagged_kernel(float* g, std::size_t n, const std::uint32_t* word) {
  if (*word == 0) return;
  for (std::size_t i = first_index(); i < n; i += stride()) g[i] = 0.0f;
}

__global__ void count_flags_kernel(const std::uint32_t* words, std::size_t m, std::int32_t* count) {
  std::int32_t total = 0;
  for (std::size_t b = 0; b < m; ++b) total += words[b] != 0 ? 1 : 0;
  *count = total;
}

__global__ void poison_if_counted_kernel(float* out, std::size_t n, const std::int32_t* count) {
  if (*count <= 0) return;
  for (std::size_t i = first_index(); i < n; i += stride()) out[i] = NAN;
}

}  // namespace

void flag_nonfinite(const float* g, std::size_t n, std::uint32_t* word, cudaStream_t stream) {
  if (n == 0) return;
  flag_nonfinite_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, n, word);
  CUDA_CHECK(cudaGetLastError());
}

void flag_nonfinite_sum(const compress::SpanStats* input, std::uint32_t* word,
                        cudaStream_t stream) {
  flag_nonfinite_sum_kernel<<<1, 1, 0, stream>>>(input, word);
  CUDA_CHECK(cudaGetLastError());
}

void zero_if_flagged(float* g, std::size_t n, const std::uint32_t* word, cudaStream_t stream) {
  if (n == 0) return;
  zero_if_flagged_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, n, word);
  CUDA_CHECK(cudaGetLastError());
}

void count_flags(const std::uint32_t* words, std::size_t m, std::int32_t* count,
                 cudaStream_t stream) {
  count_flags_kernel<<<1, 1, 0, stream>>>(words, m, count);  // m is the number of buckets
  CUDA_CHECK(cudaGetLastError());
}

void poison_if_counted(float* out, std::size_t n, const std::int32_t* count, cudaStream_t stream) {
  if (n == 0) return;
  poison_if_counted_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, count);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
