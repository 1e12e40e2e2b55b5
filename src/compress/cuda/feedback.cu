#include "compress/cuda/feedback_cuda.h"
#include "compress/cuda/grid.cuh"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__global__ void accumulate_kernel(const float* g, float* e, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += stride()) e[i] = g[i] + e[i];
}

}  // namespace

void accumulate_gradient(const float* g, float* e, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, e, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
