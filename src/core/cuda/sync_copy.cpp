#include "core/cuda/sync_copy.h"

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"

namespace sparq::cuda {

void copy_synchronously(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace sparq::cuda
