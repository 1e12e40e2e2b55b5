#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/stream_delay.h"

namespace sparq::cuda {
namespace {

__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread: the spin costs one warp slot on one SM, which the compute stream's kernels
// share; __nanosleep keeps that warp off the issue slots most of the time.
__global__ void delay_kernel(std::uint64_t nanoseconds) {
  const std::uint64_t begin = global_ns();
  while (global_ns() - begin < nanoseconds) __nanosleep(1000);
}

}  // namespace

void enqueue_stream_delay(double microseconds, cudaStream_t stream) {
  if (!(microseconds > 0)) return;
  delay_kernel<<<1, 1, 0, stream>>>(static_cast<std::uint64_t>(microseconds * 1e3));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
