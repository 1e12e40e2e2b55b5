#include "compress/blockquant.h"

#include "compress/device_codec.h"
#include "compress/options.h"
#include "compress/random_streams.h"
#include "core/check.h"

namespace sparq::compress {

Result<BlockQuantCompressor::Options> BlockQuantCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  SPARQ_ASSIGN_OR_RETURN(o.quant, parse_block_quant(reader));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  return o;
}

void BlockQuantCompressor::encode(std::span<const float> a, const EncodeContext& ctx,
                                  Message& msg) {
  msg.resize(blockquant_run_bytes(a.size(), options_.quant));
  RoundingRng rng;
  if (options_.quant.stochastic) {
    rng.key = step_key(ctx.seed, ctx.step);
    rng.stream = compression_stream(ctx, ctx.rank);
    rng.first_position = ctx.offset;
  }
  blockquant_encode_run(a.data(), a.size(), options_.quant, rng, msg.data());
}


Status BlockQuantCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  SPARQ_RETURN_IF_ERROR(check_message_size(*this, msg, n, blockquant_run_bytes(n, options_.quant)));
  return check_block_scales(msg.data(), n, options_.quant, name());
}

void BlockQuantCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out,
                                  float alpha, DecodeMode mode, const EncodeContext&) const {
  SPARQ_CHECK(msg.size() == blockquant_run_bytes(out.size(), options_.quant),
              "blockquant: message of {} bytes for {} floats", msg.size(), out.size());
  blockquant_decode_run(msg.data(), out.size(), options_.quant, alpha, mode, out.data());
}

std::unique_ptr<DeviceCodec> BlockQuantCompressor::device_codec() const {
  return make_blockquant_device_codec(options_.quant);
}

double BlockQuantCompressor::contraction_delta(std::size_t) const {
  return blockquant_delta(options_.quant);
}

}  // namespace sparq::compress
