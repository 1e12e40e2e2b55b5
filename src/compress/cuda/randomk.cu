#include "compress/cuda/feedback_cuda.h"
#include "compress/cuda/grid.cuh"
#include "compress/cuda/randomk_cuda.h"
#include "compress/cuda/wire_bytes.cuh"
#include "compress/randomk_positions.h"
#include "core/cuda/cuda_check.h"
#include "core/host_device.h"

namespace sparq::cuda {
namespace {

using compress::randomk_position;
using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__global__ void encode_kernel(float* x, std::size_t n, RandomkArgs a, bool feedback,
                              std::uint8_t* msg) {
  for (std::size_t j = first_index(); j < a.k; j += stride()) {
    const std::size_t pos = randomk_position(n, a.k, j, a.key, a.stream);
    const float v = x[pos];
    store_f32(msg + 4 * j, v);
    if (feedback) x[pos] = x[pos] + -1.0f * v;  // decode with alpha -1 added: exactly 0
  }
}

__global__ void fill_zero_kernel(float* y, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += stride()) y[i] = 0.0f;
}

// Strata are disjoint, so no two threads write one element.
__global__ void decode_kernel(const std::uint8_t* msg, std::size_t n, RandomkArgs a, float alpha,
                              float* y) {
  for (std::size_t j = first_index(); j < a.k; j += stride()) {
    const std::size_t pos = randomk_position(n, a.k, j, a.key, a.stream);
    y[pos] = mul_add(alpha, load_f32(msg + 4 * j), y[pos]);  // Note [Written-out multiply-adds]
  }
}

}  // namespace

void randomk_encode(const float* g, float* x, std::size_t n, const RandomkArgs& args,
                    std::uint8_t* msg, cudaStream_t stream) {
  if (g != nullptr) accumulate_gradient(g, x, n, stream);
  if (args.k == 0) return;
  encode_kernel<<<grid_for(args.k), kThreads, 0, stream>>>(x, n, args, g != nullptr, msg);
  CUDA_CHECK(cudaGetLastError());
}

void randomk_decode(const std::uint8_t* msg, std::size_t n, const RandomkArgs& args, float alpha,
                    bool add, float* out, cudaStream_t stream) {
  if (!add && n > 0) {
    fill_zero_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n);
    CUDA_CHECK(cudaGetLastError());
  }
  if (args.k == 0) return;
  decode_kernel<<<grid_for(args.k), kThreads, 0, stream>>>(msg, n, args, alpha, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
