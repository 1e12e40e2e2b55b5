// two_phase: all-to-all of per-region messages, region owners average and re-compress with a
// server-side residual, then allgather of the region results (see aggregation.h).
//
// Phase 1 (rank r -> rank j): C(a_r[R_j]) with R_j = [j n / P, (j + 1) n / P), encoded with
// ctx.offset = begin of R_j; a region of zero length sends a zero-byte message.
// Phase 2 (rank j -> all): server compression on:  C(avg_j + s_j), s_j = avg_j + s_j - D(.)
//                          server compression off: avg_j as raw f32 (4 |R_j| bytes).
// The server residual s_j (|R_j| floats, zero at start) is this aggregator's state. It is not
// averaged over ranks: it is the pending mass of region j itself, so an elastic resume
// re-partitions it (state_merge()) instead of taking a mean.
#pragma once

#include <cstddef>

#include "compress/aggregation.h"

namespace sparq::compress {

// The first position of region j of a bucket of n floats split among p ranks (R_j above).
inline std::size_t two_phase_region_begin(std::size_t n, std::size_t p, std::size_t j) {
  return n * j / p;
}

class TwoPhaseAggregator final : public Aggregator {
 public:
  explicit TwoPhaseAggregator(AggregatorOptions options) : options_(options) {}
  std::string_view name() const override { return "two_phase"; }
  Status run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef, comm::Communicator& comm,
             const EncodeContext& ctx) override;
  // Server compression re-encodes each region's average with the bucket's compressor, so a
  // compressor with position_state (dgc) is refused then: its owner's momentum would take
  // the already-averaged region a second time. A compressor that scales by its span's norm
  // (dgc's clip_norm) is refused always: each region would be clipped on its own.
  Status check_compressor(const Compressor& c) const override;

  std::span<const float> server_residual() const { return server_residual_; }
  void save_state(std::vector<std::uint8_t>& out) const override;
  Status load_state(std::span<const std::uint8_t> in) override;
  // Elastic resume: the old owners' regions, concatenated, are the bucket-long server
  // residual; the new rank keeps its new region of it (exact; region_merge in the .cpp).
  std::unique_ptr<StateMerge> state_merge(const MergeShape& shape) const override;

 private:
  AggregatorOptions options_;
  std::vector<float> server_residual_;
  std::vector<float> average_;
  Message msg_;
  std::vector<std::uint8_t> send_, recv_;
  std::vector<std::size_t> send_counts_, send_displs_, recv_counts_, recv_displs_;
};

}  // namespace sparq::compress
