// Flat elementwise kernels on device f32 arrays (the device twins of core/ops.h), launched
// asynchronously on the given stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace sparq::cuda {

void fill(float* x, std::size_t n, float value, cudaStream_t stream);
void scale(float* x, std::size_t n, float alpha, cudaStream_t stream);
void axpy(float alpha, const float* x, float* y, std::size_t n, cudaStream_t stream);
// dst[i] = bf16 bits of src[i], rounded to nearest even (core/half_math.h's bf16_bits_of, the
// host's rounding bit for bit).
void cast_to_bf16(const float* src, std::uint16_t* dst, std::size_t n, cudaStream_t stream);

}  // namespace sparq::cuda
