#include "core/dtype.h"

#include <bit>
#include <cstring>

#include "core/check.h"

namespace sparq {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kU16: return 2;
  }
  SPARQ_FATAL("unknown dtype {}", static_cast<int>(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kU16: return "u16";
  }
  return "?";
}

std::string_view device_name(Device device) {
  return device == Device::kCPU ? "cpu" : "cuda";
}

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
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
    const float magnitude = std::bit_cast<float>(abs);
    const float shifted = magnitude + 0.5f;
    const std::uint32_t mant = std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u;
    return static_cast<std::uint16_t>(sign | mant);
  }
  // Normal: rebias exponent (127 -> 15), round mantissa 23 -> 10 bits to nearest even.
  const std::uint32_t mant_odd = (abs >> 13) & 1u;
  std::uint32_t rounded = abs + 0xc8000fffu + mant_odd;  // -(112 << 23) + 0xfff + odd
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

float half_bits_to_float(std::uint16_t bits) {
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
      out = sign | std::bit_cast<std::uint32_t>(f);
    }
  } else {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t float_to_bf16_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate but force a quiet mantissa bit
    return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  }
  const std::uint32_t lsb = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);  // overflow rounds to Inf
}

float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

void float_to_half(const float* in, std::uint16_t* out, std::size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half_bits(in[i]);
}

void half_to_float(const std::uint16_t* in, float* out, std::size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (std::size_t i = 0; i < n; ++i) out[i] = half_bits_to_float(in[i]);
}

void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_bf16_bits(in[i]);
}

void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_bits_to_float(in[i]);
}

}  // namespace sparq
