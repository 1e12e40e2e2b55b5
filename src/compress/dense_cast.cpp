#include "compress/dense_cast.h"

#include <algorithm>
#include <cstring>

#include "compress/device_codec.h"
#include "core/check.h"
#include "core/host_device.h"
#include "core/ops.h"

namespace sparq::compress {
namespace {

// Conversions run through a stack buffer of this many floats, chunks spread over threads.
constexpr std::size_t kChunk = 4096;

}  // namespace

std::unique_ptr<DeviceCodec> DenseCastCompressor::device_codec() const {
  if (format_ == Format::kF32) return nullptr;
  return make_dense_cast_device_codec(format_ == Format::kF16);
}

std::string_view DenseCastCompressor::name() const {
  switch (format_) {
    case Format::kF32: return "none";
    case Format::kF16: return "fp16";
    case Format::kBF16: return "bf16";
  }
  return "?";
}

DType DenseCastCompressor::wire_dtype() const {
  return format_ == Format::kF32 ? DType::kF32 : format_ == Format::kF16 ? DType::kF16
                                                                        : DType::kBF16;
}

double DenseCastCompressor::contraction_delta(std::size_t) const {
  if (format_ == Format::kF32) return 1.0;
  const double rel = format_ == Format::kF16 ? 1.0 / 2048.0 : 1.0 / 256.0;
  return 1.0 - rel * rel;
}

void DenseCastCompressor::encode(std::span<const float> a, const EncodeContext& ctx,
                                 Message& msg) {
  const std::size_t n = a.size();
  msg.resize(*fixed_message_bytes(n));
  if (format_ == Format::kF32) {
    std::memcpy(msg.data(), a.data(), 4 * n);
    return;
  }
  const float inv_p = 1.0f / static_cast<float>(ctx.world_size);
  // Note [fp16 sums stay finite]
  const float limit = cast16_sum_limit(format_ == Format::kF16, ctx.world_size);
  auto* out = reinterpret_cast<std::uint16_t*>(msg.data());
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 8)
  for (std::size_t c = 0; c < chunks; ++c) {
    float scaled[kChunk];
    const std::size_t begin = c * kChunk, len = std::min(kChunk, n - begin);
    for (std::size_t j = 0; j < len; ++j) scaled[j] = a[begin + j] * inv_p;
    for (std::size_t j = 0; j < len; ++j) scaled[j] = clamp_to_half_range(scaled[j], limit);
    if (format_ == Format::kF16) {
      float_to_half(scaled, out + begin, len);
    } else {
      float_to_bf16(scaled, out + begin, len);
    }
  }
}


Status DenseCastCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  return check_message_size(*this, msg, n, *fixed_message_bytes(n));
}

void DenseCastCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out,
                                 float alpha, DecodeMode mode, const EncodeContext& ctx) const {
  const std::size_t n = out.size();
  SPARQ_CHECK(msg.size() == *fixed_message_bytes(n), "{}: message of {} bytes for {} floats",
              name(), msg.size(), n);
  if (format_ == Format::kF32) {
    const auto* in = reinterpret_cast<const float*>(msg.data());
    if (mode == DecodeMode::kSet && alpha == 1.0f) {
      std::memcpy(out.data(), in, 4 * n);
    } else {
      if (mode == DecodeMode::kSet) ops::fill(out.data(), n, 0.0f);
      ops::axpy(alpha, in, out.data(), n);
    }
    return;
  }
  const float factor = alpha * static_cast<float>(ctx.world_size);
  const auto* in = reinterpret_cast<const std::uint16_t*>(msg.data());
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 8)
  for (std::size_t c = 0; c < chunks; ++c) {
    float wide[kChunk];
    const std::size_t begin = c * kChunk, len = std::min(kChunk, n - begin);
    if (format_ == Format::kF16) {
      half_to_float(in + begin, wide, len);
    } else {
      bf16_to_float(in + begin, wide, len);
    }
    float* y = out.data() + begin;
    if (mode == DecodeMode::kSet) {
      for (std::size_t j = 0; j < len; ++j) y[j] = factor * wide[j];
    } else {
      // Note [Written-out multiply-adds] (core/host_device.h): the device's bits.
      for (std::size_t j = 0; j < len; ++j) y[j] = mul_add(factor, wide[j], y[j]);
    }
  }
}

}  // namespace sparq::compress
