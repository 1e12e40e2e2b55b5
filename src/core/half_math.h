// f16 and bf16 conversions as shared per-element math (core/host_device.h): one definition for
// the CPU (dtype.h's float_to_half_bits and friends call these) and for CUDA kernels (the
// block codec's f16 scales, the bf16/fp16 casts), so both sides give the same bits. Round to
// nearest even; NaN stays a quiet NaN; f16 overflow goes to Inf and f16 denormals are exact.
// No FPU state is read: the only float arithmetic is one exact-or-correctly-rounded add.
#pragma once

#include <cmath>
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

// A finite value above `limit` in magnitude becomes +-limit (a half, at most 65504, the
// largest finite one); anything else is returned as it is (NaN and Inf included). The fp16
// compressor sends its values through it with half_sum_limit(P), so one large gradient costs
// a clipped message and a residual that keeps the excess, not an Inf residual that poisons
// every later step (Note [fp16 sums stay finite]).
SPARQ_HOST_DEVICE inline float clamp_to_half_range(float value, float limit = 65504.0f) {
  if (value > limit && value <= 3.4028234664e38f) return limit;
  if (value < -limit && value >= -3.4028234664e38f) return -limit;
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

// Note [fp16 sums stay finite]
// The fp16 cast sends half(a / P), and the allreduce sums P messages in f16, rounding once per
// addition (comm/mpi_types.cpp, NCCL alike). Clamping each message at 65504 let P saturated
// messages sum to Inf (65504 + 65504), which the decode took for a non-finite gradient: the
// step was skipped while error feedback had already taken the sent mass out of the residual
// (review, 2026-12-07). So each message is clamped at the largest half h with
// P h (1 + 2^-11)^P <= 65504: the exact sum is at most P h, each of the P - 1 roundings
// adds at most a relative 2^-11, and the last factor covers the bound itself; the sum stays
// at most 65504. For one rank nothing is summed and the bound is 65504 itself (the cast of a
// value below 65520 rounds there anyway). Host only: the kernels get it as an argument.
// The bound is the chain's worst case and grows cautious with P: P h is 97% of 65504 at 64
// ranks, 61% at 1024 and 14% at 4096, where more of a large gradient waits in the residual
// (and an f16 sum of thousands of values loses more than that to rounding anyway). It
// applies under compress.aggregation: allgather too, where nothing is summed in f16.
inline float half_sum_limit(int world_size) {
  if (world_size <= 1) return 65504.0f;
  // One pow, not P divisions: this runs at every encode, and P may be thousands.
  const float wanted = static_cast<float>(
      65504.0 / (world_size * std::pow(1.0 + 1.0 / 2048.0, static_cast<double>(world_size))));
  std::uint16_t bits = half_bits_of(wanted);
  if (float_of_half_bits(bits) > wanted) --bits;  // the largest half not above it
  return float_of_half_bits(bits);
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

// Note [fp16 sums stay finite] for the bf16 cast: the largest bf16 h with
// P h (1 + 2^-8)^P <= FLT_MAX (bf16 rounds each addition by at most a relative 2^-8), and for
// one rank the largest finite bf16. Unclamped, a value within 0.2% of FLT_MAX rounded to Inf,
// and two messages of 2^127 summed to it, with the fp16 cast's consequences (review,
// 2026-12-07). clamp_to_half_range clamps to it as to the half bound.
inline float bf16_sum_limit(int world_size) {
  constexpr std::uint16_t kLargestFinite = 0x7f7f;
  if (world_size <= 1) return float_of_bf16_bits(kLargestFinite);
  const double wanted = 3.4028234663852886e38 /
                        (world_size * std::pow(1.0 + 1.0 / 256.0, static_cast<double>(world_size)));
  std::uint16_t bits = bf16_bits_of(static_cast<float>(wanted));
  if (bits > kLargestFinite) bits = kLargestFinite;
  if (static_cast<double>(float_of_bf16_bits(bits)) > wanted) --bits;  // not above it
  return float_of_bf16_bits(bits);
}

// The message clamp of the 16-bit casts (dense_cast.cpp and its kernels alike).
inline float cast16_sum_limit(bool half, int world_size) {
  return half ? half_sum_limit(world_size) : bf16_sum_limit(world_size);
}

}  // namespace sparq
