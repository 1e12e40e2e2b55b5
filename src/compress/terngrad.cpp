#include "compress/terngrad.h"

#include <algorithm>
#include <cmath>

#include "compress/block_codec.h"
#include "compress/byte_io.h"
#include "compress/device_codec.h"
#include "compress/quant_math.h"
#include "compress/random_streams.h"
#include "compress/span_stats.h"
#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {
namespace {

constexpr std::size_t kSub = 256;  // values per stack buffer (a multiple of 4)

}  // namespace

Result<TernGradCompressor::Options> TernGradCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  SPARQ_ASSIGN_OR_RETURN(o.clip_sigma, reader.real("clip_sigma", 2.5, 0.0, 100.0, true));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  return o;
}

std::unique_ptr<DeviceCodec> TernGradCompressor::device_codec() const {
  return make_terngrad_device_codec(options_.clip_sigma);
}

void TernGradCompressor::encode(std::span<const float> a, const EncodeContext& ctx,
                                Message& msg) {
  const std::size_t n = a.size();
  msg.resize(*fixed_message_bytes(n));
  // Note [Fixed-partition sums]: the same bits on any thread count, and on the GPU twin.
  const SpanStats stats = span_stats(a.data(), n, StatTerm::kValue, StatTerm::kSquare);
  const float s = terngrad_scale(stats, n, options_.clip_sigma);
  store_f32(msg.data(), s);
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  // A subnormal s makes 1 / s overflow (fuzzing): qsgd_code divides by s instead.
  const bool tiny_scale = std::isinf(inv);
  const RoundingRng rng{step_key(ctx.seed, ctx.step), compression_stream(ctx, ctx.rank),
                        ctx.offset, nullptr};
  const std::size_t subs = (n + kSub - 1) / kSub;
#pragma omp parallel for schedule(static) if (subs > 256)
  for (std::size_t c = 0; c < subs; ++c) {
    const std::size_t begin = c * kSub, len = std::min(kSub, n - begin);
    std::uint8_t codes[kSub];
    float u[kSub];
    rounding_uniforms(rng, begin, len, u);
    for (std::size_t j = 0; j < len; ++j)
      codes[j] = terngrad_code(a[begin + j], s, inv, tiny_scale, u[j]);
    pack_codes(codes, len, 2, msg.data() + 4 + begin / 4);
  }
}


Status TernGradCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  SPARQ_RETURN_IF_ERROR(check_message_size(*this, msg, n, *fixed_message_bytes(n)));
  const float scale = load_f32(msg.data());
  if (scale < 0.0f) return Status::error("terngrad: negative scale {}", scale);
  return Status::ok();
}

void TernGradCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out,
                                float alpha, DecodeMode mode, const EncodeContext&) const {
  const std::size_t n = out.size();
  SPARQ_CHECK(msg.size() == *fixed_message_bytes(n), "terngrad: message of {} bytes for {} floats",
              msg.size(), n);
  const float f = alpha * load_f32(msg.data());
  const std::size_t subs = (n + kSub - 1) / kSub;
#pragma omp parallel for schedule(static) if (subs > 256)
  for (std::size_t c = 0; c < subs; ++c) {
    const std::size_t begin = c * kSub, len = std::min(kSub, n - begin);
    std::uint8_t codes[kSub];
    unpack_codes(msg.data() + 4 + begin / 4, len, 2, codes);
    float* y = out.data() + begin;
    for (std::size_t j = 0; j < len; ++j) {
      const float v = dequantize(codes[j], 1.0f, f);
      y[j] = mode == DecodeMode::kSet ? v : y[j] + v;
    }
  }
}

}  // namespace sparq::compress
