#include "compress/cuda/dgc_cuda.h"
#include "compress/cuda/grid.cuh"
#include "compress/dgc_math.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__global__ void momentum_kernel(const float* g, float* u, std::size_t n, float momentum,
                                double clip_norm, int world, const compress::SpanStats* norm_sq) {
  // Every thread forms the same scale from the same double.
  const float scale =
      norm_sq != nullptr ? compress::dgc_clip_scale(norm_sq->sum_a, clip_norm, world) : 1.0f;
  for (std::size_t i = first_index(); i < n; i += stride()) {
    u[i] = compress::dgc_momentum(u[i], g[i], momentum, scale);
  }
}

__global__ void mask_kernel(float* u, const std::uint32_t* idx, std::size_t k) {
  for (std::size_t j = first_index(); j < k; j += stride()) u[idx[j]] = 0.0f;
}

}  // namespace

void dgc_momentum(const float* g, float* u, std::size_t n, const DgcArgs& args,
                  const compress::SpanStats* norm_sq, cudaStream_t stream) {
  if (n == 0) return;
  momentum_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      g, u, n, args.momentum, args.clip_norm, args.world, args.clip_norm > 0 ? norm_sq : nullptr);
  CUDA_CHECK(cudaGetLastError());
}

void dgc_mask(float* u, const std::uint32_t* idx, std::size_t k, cudaStream_t stream) {
  if (k == 0) return;
  mask_kernel<<<grid_for(k), kThreads, 0, stream>>>(u, idx, k);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
