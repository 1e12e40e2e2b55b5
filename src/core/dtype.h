// Element types and devices that a Tensor view can describe, plus IEEE half (f16) and
// bfloat16 conversions with round-to-nearest-even that handle NaN, Inf and denormals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sparq {

enum class DType : std::uint8_t { kF32, kF16, kBF16, kI32, kI64, kU8, kU16 };
enum class Device : std::uint8_t { kCPU, kCUDA };

std::size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
std::string_view device_name(Device device);

// Maps a C++ element type to its DType tag (used by Tensor::data<T>() checks).
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::kU8; };

// 16-bit float payloads are stored as raw bits; these wrappers keep f16 and bf16 distinct.
struct Half { std::uint16_t bits; };
struct BFloat16 { std::uint16_t bits; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBF16; };
template <> struct DTypeOf<std::uint16_t> { static constexpr DType value = DType::kU16; };

std::uint16_t float_to_half_bits(float value);
float half_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(std::uint16_t bits);

// Bulk conversions (OpenMP-parallel for large n).
void float_to_half(const float* in, std::uint16_t* out, std::size_t n);
void half_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n);
void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n);

}  // namespace sparq
