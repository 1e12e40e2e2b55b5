// The 16-bit dense casts (compress/dense_cast.h: fp16 and bf16, messages of a / P that NCCL
// sums natively) on a CUDA device, through the shared conversions of core/half_math.h: the
// same message bits as the CPU codec for the same input and world size. Every pointer is
// device memory; work is enqueued on `stream`. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

enum class Cast16 { kF16, kBF16 };

// out[i] = the 16-bit bits of a[i] * (1 / world_size), as DenseCastCompressor::encode.
void cast16_encode(Cast16 format, const float* a, std::size_t n, int world_size,
                   std::uint16_t* out, cudaStream_t stream);

// With error feedback fused (ErrorFeedback::encode): a = g + e, out = the bits of a / P, and
// e = a - D(out) = a + (-P) * wide(out[i]), the CPU decode at alpha -1 added.
void cast16_encode_with_feedback(Cast16 format, const float* g, float* e, std::size_t n,
                                 int world_size, std::uint16_t* out, cudaStream_t stream);

// y[i] = f * wide(in[i]) (add == false) or y[i] += f * wide(in[i]), f = alpha * world_size.
void cast16_decode(Cast16 format, const std::uint16_t* in, std::size_t n, int world_size,
                   float alpha, bool add, float* y, cudaStream_t stream);

}  // namespace sparq::cuda
