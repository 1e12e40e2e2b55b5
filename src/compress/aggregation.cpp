#include "compress/aggregation.h"

#include "comm/gather.h"
#include "compress/gtopk_aggregator.h"
#include "compress/powersgd_aggregator.h"
#include "compress/two_phase_aggregator.h"
#include "core/check.h"

namespace sparq::compress {
namespace {

EncodeContext with_world(const EncodeContext& ctx, const comm::Communicator& comm) {
  EncodeContext out = ctx;
  out.rank = comm.rank();
  out.world_size = comm.size();
  out.offset = 0;
  return out;
}

class AllreduceAggregator final : public Aggregator {
 public:
  std::string_view name() const override { return "allreduce"; }
  Status run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef, comm::Communicator& comm,
             const EncodeContext& ctx_in) override {
    SPARQ_CHECK(c.capabilities().summable,
                "allreduce needs summable messages; {} aggregates by {}", c.name(),
                aggregation_name(c.aggregation()));
    const EncodeContext ctx = with_world(ctx_in, comm);
    encode_maybe_ef(c, ef, bucket, 0, ctx, msg_);
    payload_bytes_ = msg_.size();
    const std::size_t width = dtype_size(c.wire_dtype());
    SPARQ_CHECK(msg_.size() % width == 0, "{}: message is not a whole number of elements",
                c.name());
    comm.allreduce(msg_.data(), msg_.data(), msg_.size() / width, c.wire_dtype(),
                   comm::ReduceOp::kSum);
    SPARQ_RETURN_IF_ERROR(check_received(c, msg_, bucket.size(), ctx, "the allreduce"));
    c.decode(msg_, bucket, 1.0f / static_cast<float>(ctx.world_size), DecodeMode::kSet, ctx);
    return Status::ok();
  }

 private:
  Message msg_;
};

class AllgatherAggregator final : public Aggregator {
 public:
  std::string_view name() const override { return "allgather"; }
  Status run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef, comm::Communicator& comm,
             const EncodeContext& ctx_in) override {
    const EncodeContext ctx = with_world(ctx_in, comm);
    encode_maybe_ef(c, ef, bucket, 0, ctx, msg_);
    payload_bytes_ = msg_.size();
    // A step of the density warm-up changes k, hence sizes fixed at the configured density
    // do not hold: the sizes travel first. ctx.density is rank-identical, so every rank takes
    // the same branch (Note [Rank-identical collective order], communicator.h).
    const std::optional<std::size_t> fixed =
        ctx.density > 0 ? std::nullopt : c.fixed_message_bytes(bucket.size());
    // A compressor that breaks its own promise failed check_own_message_size() already.
    comm::allgather_bytes(comm, msg_, fixed, c.max_message_bytes(bucket.size()), recv_, counts_,
                          displs_);
    const float alpha = 1.0f / static_cast<float>(ctx.world_size);
    // Every rank holds the same messages, so every rank fails on the same one.
    for (int r = 0; r < ctx.world_size; ++r) {
      EncodeContext from = ctx;
      from.rank = r;  // the context the message was encoded under
      const std::span<const std::uint8_t> m(recv_.data() + displs_[r], counts_[r]);
      SPARQ_RETURN_IF_ERROR(check_received(c, m, bucket.size(), from, fmt::format("rank {}", r)));
      c.decode(m, bucket, alpha, r == 0 ? DecodeMode::kSet : DecodeMode::kAdd, from);
    }
    return Status::ok();
  }

 private:
  Message msg_;
  std::vector<std::uint8_t> recv_;
  std::vector<std::size_t> counts_, displs_;
};

}  // namespace

Status Aggregator::load_state(std::span<const std::uint8_t> in) {
  if (!in.empty()) {
    return Status::error(
        "{} aggregation keeps no state, but {} bytes of it were saved (by another "
        "compress.aggregation, e.g. two_phase's server residual?)",
        name(), in.size());
  }
  return Status::ok();
}

Status check_received(const Compressor& c, std::span<const std::uint8_t> msg, std::size_t n,
                      const EncodeContext& from, std::string_view sender) {
  const Status s = c.check_message(msg, n, from);
  if (s.is_ok()) return s;
  // check_message names the compressor first; here it goes next to the bucket instead.
  std::string_view what = s.message();
  const std::string prefix = fmt::format("{}: ", c.name());
  if (what.starts_with(prefix)) what.remove_prefix(prefix.size());
  return Status::error("bucket {} ({}): message from {}: {}", from.bucket_id, c.name(), sender,
                       what);
}

void encode_maybe_ef(Compressor& c, ErrorFeedback* ef, std::span<const float> g,
                     std::size_t offset, const EncodeContext& ctx, Message& msg) {
  if (ef) {
    ef->encode(c, g, offset, ctx, msg);
  } else {
    c.encode(g, ctx, msg);
    check_own_message_size(c, msg, g.size(), ctx);
  }
}

std::unique_ptr<Aggregator> make_aggregator(Aggregation kind, AggregatorOptions options) {
  switch (kind) {
    case Aggregation::kAllreduce: return std::make_unique<AllreduceAggregator>();
    case Aggregation::kAllgather: return std::make_unique<AllgatherAggregator>();
    case Aggregation::kTwoPhase: return std::make_unique<TwoPhaseAggregator>(options);
    case Aggregation::kTree: return std::make_unique<GtopkAggregator>();
    case Aggregation::kLowRank: return std::make_unique<PowerSgdAggregator>();
  }
  SPARQ_FATAL("unknown aggregation");
}

}  // namespace sparq::compress
