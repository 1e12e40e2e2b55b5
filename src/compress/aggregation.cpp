#include "compress/aggregation.h"

#include "compress/gtopk_aggregator.h"
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
  Aggregation kind() const override { return Aggregation::kAllreduce; }
  void run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef, comm::Communicator& comm,
           const EncodeContext& ctx_in) override {
    SPARQ_CHECK(c.aggregation() == Aggregation::kAllreduce,
                "allreduce needs summable messages; {} aggregates by {}", c.name(),
                aggregation_name(c.aggregation()));
    const EncodeContext ctx = with_world(ctx_in, comm);
    if (c.exchange(bucket, ef, comm, ctx, payload_bytes_)) return;
    encode_maybe_ef(c, ef, bucket, 0, ctx, msg_);
    payload_bytes_ = msg_.size();
    const std::size_t width = dtype_size(c.wire_dtype());
    SPARQ_CHECK(msg_.size() % width == 0, "{}: message is not a whole number of elements",
                c.name());
    comm.allreduce(msg_.data(), msg_.data(), msg_.size() / width, c.wire_dtype(),
                   comm::ReduceOp::kSum);
    c.decode(msg_, bucket, 1.0f / static_cast<float>(ctx.world_size), DecodeMode::kSet, ctx);
  }

 private:
  Message msg_;
};

class AllgatherAggregator final : public Aggregator {
 public:
  Aggregation kind() const override { return Aggregation::kAllgather; }
  void run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef, comm::Communicator& comm,
           const EncodeContext& ctx_in) override {
    const EncodeContext ctx = with_world(ctx_in, comm);
    encode_maybe_ef(c, ef, bucket, 0, ctx, msg_);
    payload_bytes_ = msg_.size();
    allgather_messages(comm, msg_, c.fixed_message_bytes(bucket.size()), recv_, counts_,
                       displs_);
    const float alpha = 1.0f / static_cast<float>(ctx.world_size);
    for (int r = 0; r < ctx.world_size; ++r) {
      EncodeContext from = ctx;
      from.rank = r;  // the context the message was encoded under
      c.decode(std::span<const std::uint8_t>(recv_.data() + displs_[r], counts_[r]), bucket,
               alpha, r == 0 ? DecodeMode::kSet : DecodeMode::kAdd, from);
    }
  }

 private:
  Message msg_;
  std::vector<std::uint8_t> recv_;
  std::vector<std::size_t> counts_, displs_;
};

}  // namespace

Status Aggregator::load_state(std::span<const std::uint8_t> in) {
  if (!in.empty()) {
    return Status::error("{} aggregation: unexpected saved state", aggregation_name(kind()));
  }
  return Status::ok();
}

void encode_maybe_ef(Compressor& c, ErrorFeedback* ef, std::span<const float> g,
                     std::size_t offset, const EncodeContext& ctx, Message& msg) {
  if (ef) {
    ef->encode(c, g, offset, ctx, msg);
  } else {
    c.encode(g, ctx, msg);
  }
}

void allgather_messages(comm::Communicator& comm, const Message& mine,
                        std::optional<std::size_t> fixed, std::vector<std::uint8_t>& recv,
                        std::vector<std::size_t>& counts, std::vector<std::size_t>& displs) {
  const std::size_t p = static_cast<std::size_t>(comm.size());
  counts.assign(p, mine.size());
  if (fixed) {
    SPARQ_CHECK(mine.size() == *fixed, "message of {} bytes, the compressor promised {}",
                mine.size(), *fixed);
  } else {
    std::vector<std::int64_t> sizes(p);
    const std::int64_t own = static_cast<std::int64_t>(mine.size());
    comm.allgather(&own, sizes.data(), 1, DType::kI64);
    for (std::size_t r = 0; r < p; ++r) counts[r] = static_cast<std::size_t>(sizes[r]);
  }
  displs.assign(p, 0);
  for (std::size_t r = 1; r < p; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  recv.resize(displs[p - 1] + counts[p - 1]);
  if (fixed) {
    comm.allgather(mine.data(), recv.data(), mine.size(), DType::kU8);
  } else {
    comm.allgatherv(mine.data(), recv.data(), counts, displs, DType::kU8);
  }
}

std::unique_ptr<Aggregator> make_aggregator(Aggregation kind, AggregatorOptions options) {
  switch (kind) {
    case Aggregation::kAllreduce: return std::make_unique<AllreduceAggregator>();
    case Aggregation::kAllgather: return std::make_unique<AllgatherAggregator>();
    case Aggregation::kTwoPhase: return std::make_unique<TwoPhaseAggregator>(options);
    case Aggregation::kTree: return std::make_unique<GtopkAggregator>();
  }
  SPARQ_FATAL("unknown aggregation");
}

}  // namespace sparq::compress
