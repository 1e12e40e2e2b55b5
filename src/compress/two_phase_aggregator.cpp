#include "compress/two_phase_aggregator.h"

#include <algorithm>
#include <cstring>

#include "comm/gather.h"
#include "compress/byte_io.h"
#include "compress/random_streams.h"
#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {

Status TwoPhaseAggregator::run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef,
                               comm::Communicator& comm, const EncodeContext& ctx_in) {
  const std::size_t n = bucket.size(), p = static_cast<std::size_t>(comm.size());
  const std::size_t me = static_cast<std::size_t>(comm.rank());
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = comm.size();
  payload_bytes_ = 0;

  // Phase 1: one message per region, packed in region order.
  send_.clear();
  send_counts_.assign(p, 0);
  for (std::size_t j = 0; j < p; ++j) {
    const std::size_t begin = two_phase_region_begin(n, p, j),
                      len = two_phase_region_begin(n, p, j + 1) - begin;
    if (len == 0) continue;
    ctx.offset = begin;
    encode_maybe_ef(c, ef, bucket.subspan(begin, len), begin, ctx, msg_);
    send_counts_[j] = msg_.size();
    send_.insert(send_.end(), msg_.begin(), msg_.end());
  }
  payload_bytes_ += send_.size();
  send_displs_ = comm::packed_displs(send_counts_);
  std::vector<std::int64_t> sizes_out(send_counts_.begin(), send_counts_.end()), sizes_in(p);
  comm.alltoall(sizes_out.data(), sizes_in.data(), 1, DType::kI64);
  // The owner's region, here for the size check; averaged below.
  const std::size_t my_begin = two_phase_region_begin(n, p, me);
  const std::size_t my_len = two_phase_region_begin(n, p, me + 1) - my_begin;
  recv_counts_.resize(p);
  for (std::size_t r = 0; r < p; ++r) {
    recv_counts_[r] = comm::checked_peer_size(sizes_in[r], c.max_message_bytes(my_len),
                                              static_cast<int>(r), "its message for my region");
  }
  recv_displs_ = comm::packed_displs(recv_counts_);
  recv_.resize(comm::total_count(recv_counts_));
  comm.alltoallv(send_.data(), send_counts_, send_displs_, recv_.data(), recv_counts_,
                 recv_displs_, DType::kU8);

  // The owner averages its region in rank order (the order allgather decodes in).
  average_.resize(my_len);
  ctx.offset = my_begin;
  // Only this rank sees its region's messages: a bad one is remembered and skipped (counted
  // as zero) so that phase 2 still runs on every rank, and is reported at the end.
  Status failure;
  if (my_len > 0) {
    bool first = true;  // kSet for the first good message: as allgather decodes, bit for bit
    for (std::size_t r = 0; r < p; ++r) {
      EncodeContext from = ctx;
      from.rank = static_cast<int>(r);
      const std::span<const std::uint8_t> m(recv_.data() + recv_displs_[r], recv_counts_[r]);
      const Status s = check_received(c, m, my_len, from, fmt::format("rank {}", r));
      if (!s.is_ok()) {
        if (failure.is_ok()) failure = s;
        continue;
      }
      c.decode(m, average_, 1.0f / static_cast<float>(p),
               first ? DecodeMode::kSet : DecodeMode::kAdd, from);
      first = false;
    }
    if (first) ops::fill(average_.data(), my_len, 0.0f);
  }

  // Phase 2: the region result, re-compressed against the server residual or dense.
  if (options_.server_compression) {
    if (server_residual_.empty()) server_residual_.assign(my_len, 0.0f);
    SPARQ_CHECK(server_residual_.size() == my_len,
                "bucket {}: two_phase server residual of {} floats for a region of {} "
                "(state saved with another world size?)",
                ctx.bucket_id, server_residual_.size(), my_len);
    if (my_len > 0) {
      ErrorFeedback server(server_residual_);
      server.encode(c, average_, 0, server_encode_context(ctx), msg_);
    } else {
      msg_.clear();
    }
  } else {
    msg_.resize(4 * my_len);
    if (my_len > 0) std::memcpy(msg_.data(), average_.data(), 4 * my_len);
  }
  payload_bytes_ += msg_.size();
  // The largest region's bound: no region is longer than ceil(n / p).
  const std::size_t largest = (n + p - 1) / p;
  const std::size_t region_max =
      options_.server_compression ? c.max_message_bytes(largest) : 4 * largest;
  comm::allgather_bytes(comm, msg_, std::nullopt, region_max, recv_, recv_counts_, recv_displs_);
  for (std::size_t j = 0; j < p; ++j) {
    const std::size_t begin = two_phase_region_begin(n, p, j),
                      len = two_phase_region_begin(n, p, j + 1) - begin;
    if (len == 0) continue;
    const std::span<const std::uint8_t> m(recv_.data() + recv_displs_[j], recv_counts_[j]);
    EncodeContext from = ctx;
    from.rank = static_cast<int>(j);
    from.offset = begin;
    const std::string sender = fmt::format("rank {} (region result)", j);
    if (options_.server_compression) {
      from = server_encode_context(from);  // Note [Server draws]
      SPARQ_RETURN_IF_ERROR(check_received(c, m, len, from, sender));
      c.decode(m, bucket.subspan(begin, len), 1.0f, DecodeMode::kSet, from);
    } else {
      if (m.size() != 4 * len) {
        return Status::error("bucket {} ({}): message from {}: {} bytes, expected {} dense f32",
                             from.bucket_id, c.name(), sender, m.size(), 4 * len);
      }
      std::memcpy(bucket.data() + begin, m.data(), m.size());
    }
  }
  return failure;
}

Status TwoPhaseAggregator::check_compressor(const Compressor& c) const {
  if (c.capabilities().scales_by_span_norm) {
    return Status::error(
        "{0} cannot aggregate by two_phase with its local clipping: two_phase encodes a "
        "bucket one region at a time, so each region would be clipped by its own norm (to "
        "clip_norm / sqrt(P) each, turning the bucket's gradient); set "
        "compress.{0}.clip_norm: 0, or use allgather",
        c.name());
  }
  if (!options_.server_compression || !c.capabilities().position_state) return Status::ok();
  return Status::error(
      "{} cannot aggregate by two_phase with server compression: each region "
      "owner re-encodes the region's average with it, which would apply its "
      "per-position state (momentum) to the average a second time; set "
      "compress.server_compression: false, or use allgather",
      c.name());
}

void TwoPhaseAggregator::save_state(std::vector<std::uint8_t>& out) const {
  save_floats(server_residual_, out);
}

Status TwoPhaseAggregator::load_state(std::span<const std::uint8_t> in) {
  return load_floats(in, server_residual_, "two_phase server residual");
}

}  // namespace sparq::compress

namespace sparq::compress {
namespace {

// Old rank j's region R_j of an old bucket [o, o + c) is [o + j c / P, o + (j + 1) c / P) in
// the flat layout; the new rank keeps the floats of its new region there. The old regions of
// the old buckets tile every compressed position, so each new float is written exactly once,
// whatever the old and new bucket plans.
class RegionMerge final : public StateMerge {
 public:
  explicit RegionMerge(const MergeShape& shape)
      : begin_(shape.offset + two_phase_region_begin(shape.size, shape.new_world, shape.new_rank)),
        end_(shape.offset +
             two_phase_region_begin(shape.size, shape.new_world, shape.new_rank + 1)),
        old_world_(shape.old_world),
        mine_(end_ - begin_, 0.0f) {}

  Status add(int old_rank, std::size_t old_offset, std::size_t old_size,
             std::span<const std::uint8_t> state) override {
    const std::size_t p = old_world_, j = old_rank;
    const std::size_t b = old_offset + two_phase_region_begin(old_size, p, j);
    const std::size_t e = old_offset + two_phase_region_begin(old_size, p, j + 1);
    SPARQ_RETURN_IF_ERROR(load_floats(state, region_, "two_phase server residual"));
    if (region_.empty()) return Status::ok();  // before its first exchange: zeros
    if (region_.size() != e - b) {
      return Status::error("two_phase server residual of old rank {}: {} floats for its region "
                           "of {} (bucket of {} floats, {} ranks)",
                           old_rank, region_.size(), e - b, old_size, p);
    }
    any_ = true;
    for (std::size_t x = std::max(b, begin_); x < std::min(e, end_); ++x) {
      mine_[x - begin_] = region_[x - b];
    }
    return Status::ok();
  }
  Result<MergedState> finish() override {
    MergedState out;
    if (!any_) return out;
    save_floats(mine_, out.bytes);
    out.rule = "re-partitioned";
    return out;
  }

 private:
  std::size_t begin_, end_;
  int old_world_;
  std::vector<float> mine_, region_;
  bool any_ = false;
};

}  // namespace

std::unique_ptr<StateMerge> TwoPhaseAggregator::state_merge(const MergeShape& shape) const {
  return std::make_unique<RegionMerge>(shape);
}

}  // namespace sparq::compress
