#include "compress/topk.h"

#include "compress/device_codec.h"
#include "compress/options.h"
#include "compress/random_streams.h"
#include "compress/sparse_format.h"
#include "core/rng.h"

namespace sparq::compress {

Result<TopkCompressor::Options> TopkCompressor::Options::parse(ConfigReader& reader,
                                                               bool sampled, bool global) {
  Options o;
  o.sampled = sampled;
  o.global = global;
  SPARQ_ASSIGN_OR_RETURN(o.density, parse_density(reader));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  return o;
}

void TopkCompressor::encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) {
  const std::size_t k = k_for(density_for(options_.density, ctx), a.size());
  if (options_.sampled) {
    selector_.sampled(a, k, step_key(ctx.seed, ctx.step), compression_stream(ctx, ctx.rank),
                      indices_, &kept_);
  } else {
    selector_.exact(a, k, indices_, &kept_);
  }
  encode_sparse_pairs(indices_, kept_, a.size(), msg);
}


Status TopkCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  return check_sparse_f32(msg, n, name());
}

void TopkCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                            DecodeMode mode, const EncodeContext&) const {
  decode_sparse_f32(msg, out, alpha, mode, name());
}

std::unique_ptr<DeviceCodec> TopkCompressor::device_codec() const {
  if (options_.sampled) return make_topk_sampled_device_codec(options_.density);
  return make_topk_device_codec(options_.density);
}

double TopkCompressor::contraction_delta(std::size_t n) const {
  const std::size_t k = k_for(options_.density, n);
  const std::size_t kept = options_.sampled ? TopkSelector::sampled_min(k) : k;
  return static_cast<double>(kept) / static_cast<double>(n);
}

}  // namespace sparq::compress
