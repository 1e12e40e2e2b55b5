#include "compress/cuda/grid.cuh"
#include "compress/cuda/send_history_cuda.h"
#include "compress/send_window.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__global__ void stamp_sent_kernel(std::uint32_t* last, const float* decoded, std::size_t n,
                                  std::uint32_t stamp) {
  for (std::size_t i = first_index(); i < n; i += stride()) {
    last[i] = compress::stamp_if_sent(last[i], decoded[i], stamp);
  }
}

// Each block counts its share, then adds it to *count once: integer additions, so the total
// is the same in any order.
__global__ void count_unsent_kernel(const std::uint32_t* last, std::size_t n, std::uint32_t cutoff,
                                    unsigned long long* count) {
  __shared__ unsigned long long partial[kThreads];
  unsigned long long mine = 0;
  for (std::size_t i = first_index(); i < n; i += stride()) {
    mine += compress::unsent_in_window(last[i], cutoff) ? 1 : 0;
  }
  partial[threadIdx.x] = mine;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0 && partial[0] > 0) atomicAdd(count, partial[0]);
}

}  // namespace

void stamp_sent(std::uint32_t* last, const float* decoded, std::size_t n, std::uint32_t stamp,
                cudaStream_t stream) {
  if (n == 0) return;
  stamp_sent_kernel<<<grid_for(n), kThreads, 0, stream>>>(last, decoded, n, stamp);
  CUDA_CHECK(cudaGetLastError());
}

void count_unsent(const std::uint32_t* last, std::size_t n, std::uint32_t cutoff,
                  unsigned long long* count, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(*count), stream));
  if (n == 0) return;
  count_unsent_kernel<<<grid_for(n), kThreads, 0, stream>>>(last, n, cutoff, count);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
