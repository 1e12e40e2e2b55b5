#include "core/dtype.h"

#include <cstring>

#include "core/check.h"
#include "core/half_math.h"

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

std::uint16_t float_to_half_bits(float value) { return half_bits_of(value); }
float half_bits_to_float(std::uint16_t bits) { return float_of_half_bits(bits); }
std::uint16_t float_to_bf16_bits(float value) { return bf16_bits_of(value); }
float bf16_bits_to_float(std::uint16_t bits) { return float_of_bf16_bits(bits); }

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
