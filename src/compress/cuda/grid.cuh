// Launch geometry shared by the compression kernels (nvcc only): blocks of kThreads and a
// capped grid that grid-stride loops cover, so any element count launches a valid grid; and
// the alignment of their scratch layouts.
#pragma once

#include <cstddef>

namespace sparq::cuda::codec {

constexpr int kThreads = 256;

// Scratch parts start on 256-byte boundaries, the alignment cudaMalloc gives.
inline std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

inline unsigned int grid_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks < 65535 * 8 ? blocks : 65535 * 8));
}

__device__ inline std::size_t first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t stride() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

}  // namespace sparq::cuda::codec
