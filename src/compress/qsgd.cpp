#include "compress/qsgd.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "compress/block_codec.h"
#include "compress/byte_io.h"
#include "compress/device_codec.h"
#include "compress/quant_math.h"
#include "compress/random_streams.h"
#include "core/check.h"

namespace sparq::compress {
namespace {

constexpr std::size_t kParallelValues = std::size_t{1} << 16;
constexpr std::size_t kSub = 256;  // values quantized per stack buffer (a multiple of 8)

}  // namespace

Result<QsgdCompressor::Options> QsgdCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  SPARQ_ASSIGN_OR_RETURN(std::int64_t levels, reader.integer("levels", 7, 1, 127));
  SPARQ_ASSIGN_OR_RETURN(std::int64_t chunk, reader.integer("chunk", 512, 8, 1 << 24));
  if (chunk % 8 != 0) {
    return Status::error("{}: must be a multiple of 8, got {}", reader.full_key("chunk"), chunk);
  }
  SPARQ_RETURN_IF_ERROR(reader.finish());
  o.levels = static_cast<int>(levels);
  o.chunk = static_cast<std::size_t>(chunk);
  return o;
}

QsgdCompressor::QsgdCompressor(Options options)
    : options_(options),
      bits_(std::bit_width(static_cast<unsigned>(2 * options.levels))) {}

std::unique_ptr<DeviceCodec> QsgdCompressor::device_codec() const {
  return make_qsgd_device_codec(options_.levels, bits_, options_.chunk);
}

std::optional<std::size_t> QsgdCompressor::fixed_message_bytes(std::size_t n) const {
  return 4 * ((n + options_.chunk - 1) / options_.chunk) + packed_code_bytes(n, bits_);
}

void QsgdCompressor::encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) {
  const std::size_t n = a.size(), c = options_.chunk;
  const std::size_t chunks = (n + c - 1) / c;
  msg.resize(*fixed_message_bytes(n));
  std::uint8_t* codes_out = msg.data() + 4 * chunks;
  const RoundingRng rng{step_key(ctx.seed, ctx.step), compression_stream(ctx, ctx.rank),
                        ctx.offset, nullptr};
  const float s = static_cast<float>(options_.levels);
#pragma omp parallel for schedule(static) if (n > kParallelValues)
  for (std::size_t ch = 0; ch < chunks; ++ch) {
    const std::size_t begin = ch * c, len = std::min(c, n - begin);
    double sq = 0.0;
    for (std::size_t j = 0; j < len; ++j) sq += static_cast<double>(a[begin + j]) * a[begin + j];
    const float norm = qsgd_chunk_norm(sq);
    store_f32(msg.data() + 4 * ch, norm);
    const float ratio = norm > 0.0f ? s / norm : 0.0f;
    // A subnormal norm makes s / norm overflow (fuzzing): qsgd_code divides instead.
    const bool tiny_norm = std::isinf(ratio);
    std::uint8_t codes[kSub];
    float u[kSub];
    for (std::size_t sub = 0; sub < len; sub += kSub) {
      const std::size_t slen = std::min(kSub, len - sub);
      rounding_uniforms(rng, begin + sub, slen, u);
      for (std::size_t j = 0; j < slen; ++j) {
        codes[j] = qsgd_code(a[begin + sub + j], ratio, tiny_norm, norm, s, u[j]);
      }
      pack_codes(codes, slen, bits_, codes_out + (begin + sub) / 8 * bits_);
    }
  }
}


Status QsgdCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  SPARQ_RETURN_IF_ERROR(check_message_size(*this, msg, n, *fixed_message_bytes(n)));
  // Chunk norms are >= 0 (NaN or inf when the gradient is: left to the trainer's guard).
  const std::size_t chunks = (n + options_.chunk - 1) / options_.chunk;
  for (std::size_t ch = 0; ch < chunks; ++ch) {
    const float norm = load_f32(msg.data() + 4 * ch);
    if (norm < 0.0f) return Status::error("qsgd: chunk {} has a negative norm {}", ch, norm);
  }
  return Status::ok();
}

void QsgdCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                            DecodeMode mode, const EncodeContext&) const {
  const std::size_t n = out.size(), c = options_.chunk;
  const std::size_t chunks = (n + c - 1) / c;
  SPARQ_CHECK(msg.size() == *fixed_message_bytes(n), "qsgd: message of {} bytes for {} floats",
              msg.size(), n);
  const std::uint8_t* codes_in = msg.data() + 4 * chunks;
  const float s = static_cast<float>(options_.levels);
#pragma omp parallel for schedule(static) if (n > kParallelValues)
  for (std::size_t ch = 0; ch < chunks; ++ch) {
    const std::size_t begin = ch * c, len = std::min(c, n - begin);
    const float f = alpha * load_f32(msg.data() + 4 * ch) / s;
    std::uint8_t codes[kSub];
    for (std::size_t sub = 0; sub < len; sub += kSub) {
      const std::size_t slen = std::min(kSub, len - sub);
      unpack_codes(codes_in + (begin + sub) / 8 * bits_, slen, bits_, codes);
      float* y = out.data() + begin + sub;
      for (std::size_t j = 0; j < slen; ++j) {
        // Note [Fused decode-add] (quant_math.h).
        y[j] = mode == DecodeMode::kSet ? dequantize(codes[j], s, f)
                                        : dequantize_add(y[j], codes[j], s, f);
      }
    }
  }
}

}  // namespace sparq::compress
