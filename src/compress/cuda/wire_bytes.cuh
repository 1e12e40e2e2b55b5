// Little-endian message bytes on the device (nvcc only), as compress/byte_io.h writes them on
// the host: messages are byte arrays with no alignment promise, so values go byte by byte.
#pragma once

#include <cstdint>

namespace sparq::cuda::codec {

// The bytes [0, count) of word at out, and back.
__device__ inline void store_bytes(std::uint64_t word, int count, std::uint8_t* out) {
  for (int i = 0; i < count; ++i) out[i] = static_cast<std::uint8_t>(word >> (8 * i));
}
__device__ inline std::uint64_t load_bytes(const std::uint8_t* in, int count) {
  std::uint64_t word = 0;
  for (int i = 0; i < count; ++i) word |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return word;
}

__device__ inline void store_u32(std::uint8_t* out, std::uint32_t v) { store_bytes(v, 4, out); }
__device__ inline std::uint32_t load_u32(const std::uint8_t* in) {
  return static_cast<std::uint32_t>(load_bytes(in, 4));
}
__device__ inline void store_f32(std::uint8_t* out, float v) { store_u32(out, __float_as_uint(v)); }
__device__ inline float load_f32(const std::uint8_t* in) { return __uint_as_float(load_u32(in)); }

}  // namespace sparq::cuda::codec
