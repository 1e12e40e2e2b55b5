#include "compress/cuda/dense_cast_cuda.h"
#include "compress/cuda/grid.cuh"
#include "core/cuda/cuda_check.h"
#include "core/half_math.h"
#include "core/host_device.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__global__ void encode_kernel(bool half, const float* a, std::size_t n, float inv_p, float limit,
                              std::uint16_t* out) {
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const float scaled = clamp_to_half_range(a[i] * inv_p, limit);
    out[i] = half ? half_bits_of(scaled) : bf16_bits_of(scaled);
  }
}

__global__ void encode_feedback_kernel(bool half, const float* g, float* e, std::size_t n,
                                       float inv_p, float limit, float minus_p,
                                       std::uint16_t* out) {
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const float a = g[i] + e[i];
    const float scaled = clamp_to_half_range(a * inv_p, limit);
    const std::uint16_t bits = half ? half_bits_of(scaled) : bf16_bits_of(scaled);
    out[i] = bits;
    // The CPU's decode into e with alpha -1 (Note [Written-out multiply-adds]).
    e[i] = mul_add(minus_p, half ? float_of_half_bits(bits) : float_of_bf16_bits(bits), a);
  }
}

__global__ void decode_kernel(bool half, const std::uint16_t* in, std::size_t n, float factor,
                              bool add, float* y) {
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const float wide = half ? float_of_half_bits(in[i]) : float_of_bf16_bits(in[i]);
    if (add) {
      y[i] = mul_add(factor, wide, y[i]);  // Note [Written-out multiply-adds]
    } else {
      y[i] = factor * wide;
    }
  }
}

}  // namespace

void cast16_encode(Cast16 format, const float* a, std::size_t n, int world_size,
                   std::uint16_t* out, cudaStream_t stream) {
  if (n == 0) return;
  // Rounded once on the host, by the CPU codec's expression.
  const float inv_p = 1.0f / static_cast<float>(world_size);
  // Note [fp16 sums stay finite]
  const float limit = cast16_sum_limit(format == Cast16::kF16, world_size);
  encode_kernel<<<grid_for(n), kThreads, 0, stream>>>(format == Cast16::kF16, a, n, inv_p, limit,
                                                      out);
  CUDA_CHECK(cudaGetLastError());
}

void cast16_encode_with_feedback(Cast16 format, const float* g, float* e, std::size_t n,
                                 int world_size, std::uint16_t* out, cudaStream_t stream) {
  if (n == 0) return;
  const float inv_p = 1.0f / static_cast<float>(world_size);
  const float minus_p = -1.0f * static_cast<float>(world_size);  // the decode's alpha * P
  const float limit = cast16_sum_limit(format == Cast16::kF16, world_size);
  encode_feedback_kernel<<<grid_for(n), kThreads, 0, stream>>>(format == Cast16::kF16, g, e, n,
                                                               inv_p, limit, minus_p, out);
  CUDA_CHECK(cudaGetLastError());
}

void cast16_decode(Cast16 format, const std::uint16_t* in, std::size_t n, int world_size,
                   float alpha, bool add, float* y, cudaStream_t stream) {
  if (n == 0) return;
  const float factor = alpha * static_cast<float>(world_size);
  decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(format == Cast16::kF16, in, n, factor, add,
                                                      y);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
