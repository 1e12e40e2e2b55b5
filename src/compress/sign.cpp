#include "compress/sign.h"

#include <cmath>

#include "compress/byte_io.h"
#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {
namespace {

constexpr std::size_t kParallelBytes = std::size_t{1} << 13;

double sum_abs(const float* x, std::size_t n) {
  double total = 0.0;
  // Fixed static chunks and an ordered sum of per-chunk partials keep it thread-count free.
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::size_t c = 0; c < chunks; ++c) {
    double s = 0.0;
    const std::size_t end = std::min(n, (c + 1) * kChunk);
    for (std::size_t i = c * kChunk; i < end; ++i) s += std::fabs(x[i]);
    partial[c] = s;
  }
  for (double p : partial) total += p;
  return total;
}

}  // namespace

void SignCompressor::encode(std::span<const float> a, const EncodeContext&, Message& msg) {
  const std::size_t n = a.size();
  msg.resize(*fixed_message_bytes(n));
  const double scale = kind_ == Kind::kSignSgd
                           ? sum_abs(a.data(), n) / static_cast<double>(n)
                           : std::sqrt(ops::sum_squares(a.data(), n) / static_cast<double>(n));
  store_f32(msg.data(), static_cast<float>(scale));
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
