#include "compress/sign.h"

#include <cmath>

#include "compress/byte_io.h"
#include "compress/device_codec.h"
#include "compress/span_stats.h"
#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {
namespace {

constexpr std::size_t kParallelBytes = std::size_t{1} << 13;

}  // namespace

std::unique_ptr<DeviceCodec> SignCompressor::device_codec() const {
  return make_sign_device_codec(kind_ == Kind::kOneBit);
}

void SignCompressor::encode(std::span<const float> a, const EncodeContext&, Message& msg) {
  const std::size_t n = a.size();
  msg.resize(*fixed_message_bytes(n));
  // Note [Fixed-partition sums]: the same bits on any thread count, and on the GPU twin.
  const bool rms = kind_ == Kind::kOneBit;
  const SpanStats stats =
      span_stats(a.data(), n, rms ? StatTerm::kSquare : StatTerm::kAbs, StatTerm::kNone);
  store_f32(msg.data(), sign_scale(stats, n, rms));
  std::uint8_t* bits = msg.data() + 4;
  const std::size_t full = n / 8;
#pragma omp parallel for schedule(static) if (full > kParallelBytes)
  for (std::size_t j = 0; j < full; ++j) {
    std::uint8_t byte = 0;
    for (std::size_t b = 0; b < 8; ++b) byte |= static_cast<std::uint8_t>((a[8 * j + b] < 0.0f) << b);
    bits[j] = byte;
  }
  if (n % 8) {
    std::uint8_t byte = 0;
    for (std::size_t i = 8 * full; i < n; ++i) byte |= static_cast<std::uint8_t>((a[i] < 0.0f) << (i % 8));
    bits[full] = byte;
  }
}


Status SignCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  SPARQ_RETURN_IF_ERROR(check_message_size(*this, msg, n, *fixed_message_bytes(n)));
  const float scale = load_f32(msg.data());
  if (scale < 0.0f) return Status::error("{}: negative scale {}", name(), scale);
  return Status::ok();
}

void SignCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                            DecodeMode mode, const EncodeContext&) const {
  const std::size_t n = out.size();
  SPARQ_CHECK(msg.size() == *fixed_message_bytes(n), "{}: message of {} bytes for {} floats",
              name(), msg.size(), n);
  const float s = alpha * load_f32(msg.data());
  const std::uint8_t* bits = msg.data() + 4;
  float* y = out.data();
  // One byte -> 8 values per iteration; the sign is a select between +s and -s.
  const std::size_t full = n / 8;
  if (mode == DecodeMode::kSet) {
#pragma omp parallel for schedule(static) if (full > kParallelBytes)
    for (std::size_t j = 0; j < full; ++j) {
      const unsigned byte = bits[j];
      for (unsigned b = 0; b < 8; ++b) y[8 * j + b] = ((byte >> b) & 1u) ? -s : s;
    }
  } else {
#pragma omp parallel for schedule(static) if (full > kParallelBytes)
    for (std::size_t j = 0; j < full; ++j) {
      const unsigned byte = bits[j];
      for (unsigned b = 0; b < 8; ++b) y[8 * j + b] += ((byte >> b) & 1u) ? -s : s;
    }
  }
  for (std::size_t i = 8 * full; i < n; ++i) {
    const float v = ((bits[i >> 3] >> (i & 7)) & 1) ? -s : s;
    y[i] = mode == DecodeMode::kSet ? v : y[i] + v;
  }
}

}  // namespace sparq::compress
