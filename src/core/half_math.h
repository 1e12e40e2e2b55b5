// f16 and bf16 conversions as shared per-element math (core/host_device.h): one definition for
// the CPU (dtype.h's float_to_half_bits and friends call these) and for CUDA kernels (the
// block codec's f16 scales, the bf16/fp16 casts), so both sides give the same bits. Round to
// nearest even; NaN stays a quiet NaN; f16 overflow goes to Inf and f16 denormals are exact.
// No FPU state is read: the only float arithmetic is one exact-or-correctly-rounded add.
#pragma once

#include <cstdint>

#include "core/host_device.h"

#ifndef __CUDA_ARCH__
#include <bit>
#endif

namespace sparq {

SPARQ_HOST_DEVICE inline std::uint32_t float_as_bits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  return std::bit_cast<std::uint32_t>(value);
#endif
}

SPARQ_HOST_DEVICE inline float bits_as_float(std::uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

SPARQ_HOST_DEVICE inline std::uint16_t half_bits_of(float value) {
  const std::uint32_t x = float_as_bits(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN; keep NaN quiet and non-zero in the mantissa
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to Inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): denormal or zero
    // Scale into the denormal grid (2^-24 per step) and round to nearest even using the
    // FPU: adding 0.5f (2^-1) aligns the value so that the low bits hold the half mantissa.
    const float magnitude = bits_as_float(abs);
    const float shifted = magnitude + 0.5f;
    const std::uint32_t mant = float_as_bits(shifted) - 0x3f000000u;
    return static_cast<std::uint16_t>(sign | mant);
  }
  // Normal: rebias exponent (127 -> 15), round mantissa 23 -> 10 bits to nearest even.
  const std::uint32_t mant_odd = (abs >> 13) & 1u;
  const std::uint32_t rounded = abs + 0xc8000fffu + mant_odd;  // -(112 << 23) + 0xfff + odd
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

// A finite value that half_bits_of would round to Inf (|x| >= 65520) becomes +-65504, the
// largest finite half; anything else is returned as it is (NaN and Inf included). The fp16
// compressor sends its values through it, so one large gradient costs a clipped message and
// a residual that keeps the excess, not an Inf residual that poisons every later step.
SPARQ_HOST_DEVICE inline float clamp_to_half_range(float value) {
  constexpr float kMaxHalf = 65504.0f;
  if (value >= 65520.0f && value <= 3.4028234664e38f) return kMaxHalf;
  if (value <= -65520.0f && value >= -3.4028234664e38f) return -kMaxHalf;
  return value;
}

SPARQ_HOST_DEVICE inline float float_of_half_bits(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  std::uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // denormal: value = mant * 2^-24, exact in float
      const float f = static_cast<float>(mant) * 5.9604644775390625e-08f;
      out = sign | float_as_bits(f);
    }
  } else {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return bits_as_float(out);
}

SPARQ_HOST_DEVICE inline std::uint16_t bf16_bits_of(float value) {
  const std::uint32_t x = float_as_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate but force a quiet mantissa bit
    return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  }
  const std::uint32_t lsb = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);  // overflow rounds to Inf
}

SPARQ_HOST_DEVICE inline float float_of_bf16_bits(std::uint16_t bits) {
  return bits_as_float(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace sparq
