#include "compress/powersgd_aggregator.h"

#include "compress/powersgd.h"
#include "core/check.h"

namespace sparq::compress {

Status accepts_low_rank(const Compressor& c) {
  if (dynamic_cast<const PowerSgdCompressor*>(&c)) return Status::ok();
  return Status::error("{} cannot aggregate by low_rank (it carries powersgd's factors only; "
                       "its own strategy is {})",
                       c.name(), aggregation_name(c.aggregation()));
}

Status PowerSgdAggregator::run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef,
                               comm::Communicator& comm, const EncodeContext& ctx_in) {
  // The registry checked accepts_low_rank(); a direct caller with another compressor is a bug.
  auto* psgd = dynamic_cast<PowerSgdCompressor*>(&c);
  SPARQ_CHECK(psgd != nullptr, "low_rank carries powersgd's factors only, not {}", c.name());
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = comm.size();
  ctx.offset = 0;
  const std::size_t n = bucket.size();
  psgd->prepare(n, ctx);
  std::span<float> a;
  if (ef) {
    SPARQ_CHECK(ef->residual().size() == n, "powersgd: residual of {} for a bucket of {}",
                ef->residual().size(), n);
    a = ef->accumulate(c, bucket, 0, ctx);
  } else {
    scratch_.assign(bucket.begin(), bucket.end());
    a = scratch_;
  }

  psgd->first_factor(a, first_);
  comm.allreduce(first_.data(), first_.data(), first_.size(), DType::kF32, comm::ReduceOp::kSum);
  payload_bytes_ = 4 * first_.size();
  psgd->keep_first(first_);
  if (psgd->sends_second_factor()) {
    psgd->second_factor(a, second_);
    comm.allreduce(second_.data(), second_.data(), second_.size(), DType::kF32,
                   comm::ReduceOp::kSum);
    payload_bytes_ += 4 * second_.size();
    psgd->keep_second(second_);
  }
  psgd->finish_exchange(bucket, a, ef != nullptr, first_, 1.0f / static_cast<float>(comm.size()));
  // Every rank applies the same M_hat: its non-zero entries are what was sent.
  if (ef && ef->send_history()) ef->send_history()->mark_nonzero(0, bucket);
  return Status::ok();
}

}  // namespace sparq::compress
