// Compressor: encodes a bucket (a contiguous f32 range of the gradient layout) into one byte
// message and decodes messages back into a dense range. A compressor declares how its
// messages must be aggregated across ranks (Aggregation), reports the exact byte size of each
// message (the message IS the bytes put on the wire, nothing is added around it), and keeps
// any state it needs (momentum, warm-started factors) saveable for checkpoints.
//
// Ownership: a compressor instance belongs to ONE bucket (it may keep per-bucket state); the
// caller owns every input and output range. Error feedback is NOT part of a compressor: wrap
// it with ErrorFeedback (error_feedback.h). The per-compressor headers document their exact
// message layouts; every multi-byte field is little-endian and may be unaligned.
//
// Determinism: encode and decode depend only on their inputs and the EncodeContext, never on
// the number of OpenMP threads, so every rank decodes every message to identical floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compress/state_merge.h"
#include "core/dtype.h"
#include "core/status.h"

namespace sparq::comm {
class Communicator;
}

namespace sparq::compress {

class ErrorFeedback;

// How the messages of all ranks are combined (see aggregation.h):
//   kAllreduce: the message is an array of wire_dtype() that may be summed elementwise, and
//               decoding is linear, so D(sum of messages) == sum of D(message).
//   kAllgather: variable messages; every rank decodes and sums all of them.
//   kTwoPhase:  per-region messages to region owners, server re-compression, allgather.
//   kTree:      pairwise merge over log2(P) rounds (gtopk), then an agreed exchange.
enum class Aggregation { kAllreduce, kAllgather, kTwoPhase, kTree };
std::string_view aggregation_name(Aggregation a);
Result<Aggregation> parse_aggregation(const std::string& text, const std::string& key);

// Everything besides the data that an encode or decode may depend on. All ranks pass the same
// seed, step, bucket_id and world_size for the same bucket; `offset` is where the encoded
// span starts inside the bucket (non-zero for the per-region messages of two_phase), so that
// per-element random numbers are addressed by bucket position and not by span position.
struct EncodeContext {
  std::uint64_t seed = 0;        // the run's compression seed
  std::int64_t step = 0;         // training step (random index sets and warm-ups vary by it)
  std::uint32_t bucket_id = 0;
  int rank = 0;
  int world_size = 1;
  std::size_t offset = 0;
  // > 0: the density of this step, in place of the compressor's configured one (the
  // compress.density_warmup_steps schedule, GradientExchange). A function of the step only,
  // so rank-identical (Note [Rank-identical collective order], communicator.h). 0: the
  // compressor's own. Compressors without a density (density() == nullopt) ignore it.
  double density = 0;
};

enum class DecodeMode { kSet, kAdd };  // out = alpha * D(m)   or   out += alpha * D(m)

// Bytes of one message. Messages are reused across steps to avoid reallocation.
using Message = std::vector<std::uint8_t>;

class Compressor {
 public:
  virtual ~Compressor() = default;

  virtual std::string_view name() const = 0;
  virtual Aggregation aggregation() const = 0;

  // Encodes `a` (n = a.size() >= 1 floats) into `msg`, resized to the exact message size.
  virtual void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) = 0;

  // Validates a message for a span of n floats received from another rank, before decode()
  // trusts it: its size, header fields, value widths, scales, and every index (in range,
  // ascending, as many as the header says). A message that encode() produced for n floats
  // under the same ctx always passes; one that passes decodes without reading or writing out
  // of bounds and without aborting. The error names the compressor and the first problem
  // ("topk: index 70000 out of range for 1000 floats"). Values are not checked for
  // finiteness: a rank's non-finite gradient is legitimate input (the trainer's guard).
  virtual Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                               const EncodeContext& ctx) const = 0;

  // Decodes a message produced by encode() for a span of out.size() floats (the same n).
  // Aborts (SPARQ_CHECK) on a message of the wrong size or header; messages from other ranks
  // go through check_message() first.
  virtual void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                      DecodeMode mode, const EncodeContext& ctx) const = 0;

  // The size of every message for n floats when it does not depend on the data (lets the
  // allgather strategy skip the size exchange); nullopt for data-dependent sizes. It is the
  // size at the configured density: a step with EncodeContext::density > 0 may differ, so
  // strategies exchange sizes on such steps.
  virtual std::optional<std::size_t> fixed_message_bytes(std::size_t n) const = 0;

  // The configured fraction of entries kept, for compressors that have one (topk,
  // topk_sampled, gtopk, randomk, dgc, lbs: they honour EncodeContext::density); nullopt for
  // the others.
  virtual std::optional<double> density() const { return std::nullopt; }

  // Only for kAllreduce compressors: the element type of the summable message.
  virtual DType wire_dtype() const { return DType::kU8; }

  // A documented lower bound on delta in ||a - D(C(a))||^2 <= (1 - delta) ||a||^2 for n
  // floats; 0 when the compressor is not a contraction (stochastic or unbiased ones).
  virtual double contraction_delta(std::size_t n) const = 0;

  // Forms a = T(g) + e in the residual span `e` (error_feedback.h calls this). T is the
  // identity for every compressor but dgc, whose T applies clipping and momentum correction
  // (state indexed by bucket position ctx.offset + i).
  virtual void accumulate(std::span<const float> g, std::span<float> e, const EncodeContext& ctx);

  // Compressors whose aggregation takes several dependent collectives (powersgd: allreduce
  // of P, orthogonalisation, allreduce of Q) run it themselves here; the allreduce strategy
  // calls this first and returns when it answers true, with the average in `bucket` and
  // `payload_bytes` set to this rank's message bytes. The default answers false (one message
  // per rank).
  virtual bool self_aggregate(std::span<float> bucket, ErrorFeedback* ef,
                              comm::Communicator& comm, const EncodeContext& ctx,
                              std::size_t& payload_bytes) {
    return false;
  }

  // Per-bucket state beyond the error-feedback residual (empty for stateless compressors).
  virtual void save_state(std::vector<std::uint8_t>& out) const { out.clear(); }
  virtual Status load_state(std::span<const std::uint8_t> in) {
    if (!in.empty()) return Status::error("{}: unexpected saved state", name());
    return Status::ok();
  }
  // Elastic resume: how the states saved by the ranks of another world size become this
  // rank's (state_merge.h). The default resets any non-empty state with a warning.
  virtual std::unique_ptr<StateMerge> state_merge(const MergeShape& shape) const;
};

// check_message() of a message whose size must be exactly `expected` bytes.
Status check_message_size(const Compressor& c, std::span<const std::uint8_t> msg, std::size_t n,
                          std::size_t expected);

// Decodes a message into a freshly zeroed vector: for tests and reference computations.
std::vector<float> decode_dense(const Compressor& c, std::span<const std::uint8_t> msg,
                                std::size_t n, const EncodeContext& ctx);

}  // namespace sparq::compress
