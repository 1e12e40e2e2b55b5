// low_rank: powersgd's own strategy (Vogels et al. 2019), the collectives of its factor
// exchange. For the bucket's matrices M = g + e (powersgd.h has the layout and the math):
//
//   full (alternate = false), two allreduces (sum) of f32 messages:
//     [P = M Q | dense floats]          allreduce, P orthonormalised by every rank alike
//     [Q = M^T P]                       allreduce, / world
//   alternate = true, one allreduce: [P = M orth(Q) | dense] on even exchanges,
//     [Q = M^T orth(P) | dense] on odd ones.
//   then bucket = P Q^T on matrices and the averaged dense floats, on every rank.
//
// The compressor keeps every float of state (the warm-started factors and the exchange
// parity), so checkpoints hold it under the compressor, and this strategy keeps none: only
// the two message buffers. It accepts powersgd alone: its steps are powersgd's factor steps
// (PowerSgdCompressor::first_factor ... finish_exchange), not a property other compressors
// could declare. last_payload_bytes() is 4 * (floats of both messages).
#pragma once

#include <vector>

#include "compress/aggregation.h"

namespace sparq::compress {

class PowerSgdAggregator final : public Aggregator {
 public:
  std::string_view name() const override { return "low_rank"; }
  Status run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef, comm::Communicator& comm,
             const EncodeContext& ctx) override;

 private:
  std::vector<float> first_, second_;  // the two messages, summed in place
  std::vector<float> scratch_;         // a copy of the gradient without error feedback
};

// The registry's accepts() of low_rank: powersgd, or an error naming c and its own strategy.
Status accepts_low_rank(const Compressor& c);

}  // namespace sparq::compress
