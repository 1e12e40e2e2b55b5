#include "compress/compressor.h"

#include <fmt/format.h>

#include "compress/device_codec.h"
#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {

std::string_view aggregation_name(Aggregation a) {
  switch (a) {
    case Aggregation::kAllreduce: return "allreduce";
    case Aggregation::kAllgather: return "allgather";
    case Aggregation::kTwoPhase: return "two_phase";
    case Aggregation::kTree: return "tree";
    case Aggregation::kLowRank: return "low_rank";
  }
  return "?";
}

Result<Aggregation> parse_aggregation(const std::string& text, const std::string& key) {
  std::string known;
  for (Aggregation a : kAggregations) {
    if (aggregation_name(a) == text) return a;
    known += fmt::format("{}{}", known.empty() ? "" : ", ", aggregation_name(a));
  }
  return Status::error("{}: unknown aggregation '{}' ({})", key, text, known);
}

CompressorCapabilities Compressor::capabilities() const {
  // What the registry assumed of every compressor before capabilities were declared: an
  // external compressor written then keeps the strategies it had.
  CompressorCapabilities c;
  c.summable = aggregation() == Aggregation::kAllreduce;
  return c;
}

Status Compressor::set_layout(std::size_t, std::vector<MatrixSegment>) {
  if (capabilities().needs_matrix_layout) {
    return Status::error("{}: declares needs_matrix_layout but does not override set_layout",
                         name());
  }
  return Status::ok();
}

std::unique_ptr<DeviceCodec> Compressor::device_codec() const { return nullptr; }

void Compressor::accumulate(std::span<const float> g, std::span<float> e,
                            const EncodeContext&) {
  SPARQ_CHECK(g.size() == e.size(), "accumulate: {} gradients for {} residuals", g.size(),
              e.size());
  ops::axpy(1.0f, g.data(), e.data(), e.size());
}

Status check_message_size(const Compressor& c, std::span<const std::uint8_t> msg, std::size_t n,
                          std::size_t expected) {
  if (msg.size() == expected) return Status::ok();
  return Status::error("{}: message of {} bytes, expected {} for {} floats", c.name(), msg.size(),
                       expected, n);
}

void check_own_message_size(const Compressor& c, std::span<const std::uint8_t> msg, std::size_t n,
                            const EncodeContext& ctx) {
  // A step of the density warm-up (ctx.density > 0) changes k, so no size is promised then.
  const std::optional<std::size_t> fixed =
      ctx.density > 0 ? std::nullopt : c.fixed_message_bytes(n);
  SPARQ_CHECK(!fixed || msg.size() == *fixed,
              "bucket {} ({}): a message of {} bytes, but {}::fixed_message_bytes({}) promised {}",
              ctx.bucket_id, c.name(), msg.size(), c.name(), n, *fixed);
  SPARQ_CHECK(msg.size() <= c.max_message_bytes(n),
              "bucket {} ({}): a message of {} bytes, above {}::max_message_bytes({}) = {}, "
              "which every peer would refuse: override max_message_bytes",
              ctx.bucket_id, c.name(), msg.size(), c.name(), n, c.max_message_bytes(n));
}

std::vector<float> decode_dense(const Compressor& c, std::span<const std::uint8_t> msg,
                                std::size_t n, const EncodeContext& ctx) {
  std::vector<float> out(n, 0.0f);
  c.decode(msg, out, 1.0f, DecodeMode::kSet, ctx);
  return out;
}

}  // namespace sparq::compress
