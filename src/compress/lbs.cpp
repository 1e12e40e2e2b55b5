#include "compress/lbs.h"

#include "compress/device_codec.h"
#include "compress/options.h"
#include "compress/sparse_format.h"
#include "compress/random_streams.h"
#include "core/check.h"

namespace sparq::compress {

Result<LbsCompressor::Options> LbsCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  SPARQ_ASSIGN_OR_RETURN(o.density, parse_density(reader));
  SPARQ_ASSIGN_OR_RETURN(o.quant, parse_block_quant(reader));
  SPARQ_ASSIGN_OR_RETURN(std::string selection,
                         reader.choice("selection", "exact", {"exact", "sampled"}));
  SPARQ_RETURN_IF_ERROR(reader.removed(
      "exchange", "set compress.aggregation: two_phase (or allgather) instead; it applies to "
                  "every compressor"));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  o.sampled = selection == "sampled";
  return o;
}

void LbsCompressor::encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) {
  const std::size_t k = k_for(density_for(options_.density, ctx), a.size());
  const std::uint64_t key = step_key(ctx.seed, ctx.step);
  const std::uint64_t stream = compression_stream(ctx, ctx.rank);
  if (options_.sampled) {
    selector_.sampled(a, k, key, stream, indices_, &kept_);
  } else {
    selector_.exact(a, k, indices_, &kept_);
  }
  const std::size_t count = indices_.size();

  const SparseHeader h = plan_indices(indices_, a.size(), static_cast<std::uint8_t>(options_.quant.bits));
  msg.resize(kSparseHeaderBytes + h.index_bytes + blockquant_run_bytes(count, options_.quant));
  std::uint8_t* values = write_sparse_prefix(h, indices_, a.size(), msg.data());
  // Stochastic rounding draws are addressed by bucket position, not by rank in the kept list.
  RoundingRng rng{key, stream, ctx.offset, indices_.data()};
  blockquant_encode_run(kept_.data(), count, options_.quant, rng, values);
}


Status LbsCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  SparseHeader h;
  SPARQ_RETURN_IF_ERROR(
      check_sparse_prefix(msg, n, static_cast<std::uint8_t>(options_.quant.bits), name(), &h));
  const std::size_t value_offset = kSparseHeaderBytes + h.index_bytes;
  const std::size_t expected = value_offset + blockquant_run_bytes(h.count, options_.quant);
  if (msg.size() != expected) {
    return Status::error("lbs: message of {} bytes, its header implies {}", msg.size(), expected);
  }
  return check_block_scales(msg.data() + value_offset, h.count, options_.quant, name());
}

void LbsCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                           DecodeMode mode, const EncodeContext&) const {
  const SparseHeader h = read_sparse_header(msg, out.size(),
                                            static_cast<std::uint8_t>(options_.quant.bits), name());
  const std::size_t value_offset = kSparseHeaderBytes + h.index_bytes;
  SPARQ_CHECK(msg.size() == value_offset + blockquant_run_bytes(h.count, options_.quant),
              "lbs: message is {} bytes, its header implies {}", msg.size(),
              value_offset + blockquant_run_bytes(h.count, options_.quant));
  decoded_.resize(h.count);
  blockquant_decode_run(msg.data() + value_offset, h.count, options_.quant, alpha,
                        DecodeMode::kSet, decoded_.data());
  prepare_output(out, mode);
  for_each_index(h, msg.data() + kSparseHeaderBytes, out.size(),
                 [&](std::uint32_t j, std::uint32_t i) { out[i] += decoded_[j]; });
}

std::unique_ptr<DeviceCodec> LbsCompressor::device_codec() const {
  return make_lbs_device_codec(options_.density, options_.quant, options_.sampled);
}

double LbsCompressor::contraction_delta(std::size_t n) const {
  if (options_.sampled) {
    return blockquant_delta(options_.quant) *
           static_cast<double>(TopkSelector::sampled_min(k_for(options_.density, n))) /
           static_cast<double>(n);
  }
  return blockquant_delta(options_.quant) * static_cast<double>(k_for(options_.density, n)) /
         static_cast<double>(n);
}

}  // namespace sparq::compress
