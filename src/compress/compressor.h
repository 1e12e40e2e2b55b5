// Compressor: encodes a bucket (a contiguous f32 range of the gradient layout) into one byte
// message and decodes messages back into a dense range. A compressor declares how its
// messages must be aggregated across ranks (Aggregation), reports the exact byte size of each
// message (the message IS the bytes put on the wire, nothing is added around it), and keeps
// any state it needs (momentum, warm-started factors) saveable for checkpoints.
//
// What a compressor's messages allow is declared by the compressor itself (capabilities(),
// set_layout()): strategies, the gradient exchange and the simulator decide by those
// properties, never by a compressor's name or type (DESIGN.md, "Capabilities, not names").
//
// Ownership: a compressor instance belongs to ONE bucket (it may keep per-bucket state); the
// caller owns every input and output range. Error feedback is NOT part of a compressor: wrap
// it with ErrorFeedback (error_feedback.h). The per-compressor headers document their exact
// message layouts; every multi-byte field is little-endian and may be unaligned.
//
// Determinism: encode and decode depend only on their inputs and the EncodeContext, never on
// the number of OpenMP threads, so every rank decodes every message to identical floats.
#pragma once

#include <algorithm>
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

namespace sparq::compress {

class DeviceCodec;  // device_codec.h

// How the messages of all ranks are combined (see aggregation.h):
//   kAllreduce: the message is an array of wire_dtype() that may be summed elementwise, and
//               decoding is linear, so D(sum of messages) == sum of D(message).
//   kAllgather: variable messages; every rank decodes and sums all of them.
//   kTwoPhase:  per-region messages to region owners, server re-compression, allgather.
//   kTree:      pairwise merge over log2(P) rounds (gtopk), then an agreed exchange.
//   kLowRank:   powersgd's factor exchange: allreduce of P, orthogonalisation, allreduce of
//               Q (powersgd_aggregator.h).
enum class Aggregation { kAllreduce, kAllgather, kTwoPhase, kTree, kLowRank };
// Every kind, in the order the registry lists the built-in strategies.
inline constexpr Aggregation kAggregations[] = {Aggregation::kAllreduce, Aggregation::kAllgather,
                                                Aggregation::kTwoPhase, Aggregation::kTree,
                                                Aggregation::kLowRank};
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
  // The step compression started at (compress.dense_warmup_steps): a compressor's own density
  // warm-up (dgc's warmup_steps) counts its steps from here, not from training step 0, which
  // a dense warm-up would otherwise use up before anything is compressed.
  std::int64_t warmup_origin = 0;
};

// What a compressor's messages and state allow, declared by the compressor
// (Compressor::capabilities()). The registry's strategies accept or refuse a compressor by
// these fields (aggregation_registry.cpp), the gradient exchange configures it by them, and
// the simulator prices it by them. The defaults (with summable from aggregation()) describe
// a compressor that only declares its own strategy.
struct CompressorCapabilities {
  // Messages are arrays of wire_dtype() that may be summed elementwise, and decode is linear:
  // D(sum of messages) == sum of D(message). The allreduce strategy needs it.
  bool summable = false;
  // Each rank's message decodes on its own, under the sender's EncodeContext, into that
  // rank's contribution, for any span of the bucket (ctx.offset), and encoding it keeps no
  // state that must stay identical across ranks. The allgather and two_phase strategies
  // need it; powersgd's factors only mean something summed over the ranks.
  bool self_contained = true;
  // Messages are sparse_format.h's lists of (index, f32 value): the simulator prices them as
  // 12 + index bytes + 4 per kept entry.
  bool sparse_f32 = false;
  // With sparse_f32: the tree strategy may sum several ranks' lists and keep the k largest,
  // k being rank 0's list size: k comes from a density shared by the ranks, and no state
  // depends on which positions the compressor itself chose (dgc's momentum masking does,
  // threshold's count is per rank).
  bool reselectable = false;
  // Needs the bucket's matrix layout, set_layout(), before its first encode (powersgd views a
  // bucket as its layers' weight matrices).
  bool needs_matrix_layout = false;
  // Sends every entry of the span (the dense casts none, fp16, bf16): a density warm-up has
  // nothing to thin out, so compress.density_warmup_steps is accepted and ignored.
  bool sends_every_entry = false;
  // Ramps its own sparsity over the first steps (dgc with warmup_steps > 0), which cannot be
  // combined with compress.density_warmup_steps.
  bool own_density_warmup = false;
  // accumulate() and encode() update state kept per bucket position (dgc's momentum, and its
  // masking at the kept positions): a second encode of positions already encoded this step,
  // as two_phase's server compression does with each region's average, would update it again.
  bool position_state = false;
  // accumulate() scales the span it is given by a statistic of that whole span (dgc's local
  // clipping by ||g||, clip_norm > 0). A strategy that encodes a bucket in parts (two_phase's
  // regions) would scale each part by its own norm, so two_phase refuses it.
  bool scales_by_span_norm = false;
  // Has a CUDA twin (device_codec.h) with the same message bytes, so a store on a GPU can be
  // exchanged compressed: device_codec() returns it in a build with CUDA. powersgd's twin is
  // its whole low_rank exchange on the device instead (device_low_rank.h).
  bool device_twin = false;
  // A zero entry decodes to zero. The sign codecs have no code for 0 and decode +scale there,
  // so the exchange zeroes the alignment gaps of their buckets after decoding (Note [Padding
  // stays zero], core/param_store.h).
  bool zero_decodes_to_zero = true;
  // Not sparse f32, but the tree may merge its lists all the same: messages in
  // sparse_format.h's layout whose k is fixed by a shared density, merged by decoding both
  // into a dense sum and encoding that again (its top-k, the merge of Note [The tree re-selects
  // from the dense sum], gtopk_aggregator.h; lbs with exact selection: low-bit lists up the
  // tree, re-quantized at each merge).
  bool merges_by_encode = false;
  // How many entries a message keeps depends on the data (sampled selection, threshold): a
  // device twin writes the count its decode reads from the message, within a bound, and the
  // device tree, which merges lists of one fixed size, does not take it.
  bool count_varies = false;
};

// Whether the tree merges this compressor's lists by decode and encode rather than as
// (index, f32 value) pairs: one rule for the CPU tree and the device tree.
inline bool tree_merges_by_encode(const CompressorCapabilities& caps) {
  return caps.merges_by_encode && !(caps.sparse_f32 && caps.reselectable);
}

// One weight matrix of a bucket, for compressors with needs_matrix_layout: [rows, cols]
// row-major floats at `offset` inside the bucket (a linear weight [out, in], a conv weight
// [out, in*kh*kw]).
struct MatrixSegment {
  std::string name;
  std::size_t offset = 0;  // in floats, inside the bucket
  std::size_t rows = 0;
  std::size_t cols = 0;
  // The whole rows of a tensor the bucket plan split, in this bucket: a piece with fewer rows
  // than powersgd's rank is sent dense rather than refused (the rank suits the tensor; the
  // cut made the piece).
  bool piece = false;
};

enum class DecodeMode { kSet, kAdd };  // out = alpha * D(m)   or   out += alpha * D(m)

// Bytes of one message. Messages are reused across steps to avoid reallocation.
using Message = std::vector<std::uint8_t>;

class Compressor {
 public:
  virtual ~Compressor() = default;

  virtual std::string_view name() const = 0;
  // Its own strategy: what compress.aggregation: auto selects.
  virtual Aggregation aggregation() const = 0;
  // What its messages allow (CompressorCapabilities). The default: one self-contained
  // message per rank, summable when aggregation() is kAllreduce, nothing else.
  virtual CompressorCapabilities capabilities() const;

  // Its CUDA twin (capabilities().device_twin), configured alike; nullptr without one or in
  // a build without CUDA.
  virtual std::unique_ptr<DeviceCodec> device_codec() const;  // default: nullptr

  // The matrices of the bucket of n floats it is about to compress (segments may come in any
  // order; floats outside them are plain floats), called once before the first encode for a
  // compressor with needs_matrix_layout; errors name the offending tensor. The default
  // accepts and ignores a layout, unless the compressor declared needs_matrix_layout without
  // overriding this (then it is an error naming the compressor).
  virtual Status set_layout(std::size_t n, std::vector<MatrixSegment> segments);

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

  // An upper bound on every message for n floats, at any density (EncodeContext::density up
  // to 1): the largest size a rank accepts from a peer before it allocates for it
  // (comm::allgather_bytes), and a check of this rank's own messages
  // (check_own_message_size). The default, 16 bytes per float and 4 KiB, is far above every
  // built-in format (a sparse f32 message at density 1 is 4.125 n + 13 bytes, a dense f32
  // one 4 n), or a fixed size when the compressor promises a larger one; a compressor whose
  // messages can be larger overrides it. Non-decreasing in n.
  virtual std::size_t max_message_bytes(std::size_t n) const {
    return std::max(16 * n + 4096, fixed_message_bytes(n).value_or(0));
  }

  // The configured fraction of entries kept, for compressors that have one (topk,
  // topk_sampled, gtopk, randomk, dgc, lbs: they honour EncodeContext::density); nullopt for
  // the others.
  virtual std::optional<double> density() const { return std::nullopt; }

  // Only for summable compressors: the element type of the summable message.
  virtual DType wire_dtype() const { return DType::kU8; }

  // A documented lower bound on delta in ||a - D(C(a))||^2 <= (1 - delta) ||a||^2 for n
  // floats; 0 when the compressor is not a contraction (stochastic or unbiased ones).
  virtual double contraction_delta(std::size_t n) const = 0;

  // Forms a = T(g) + e in the residual span `e` (error_feedback.h calls this). T is the
  // identity for every compressor but dgc, whose T applies clipping and momentum correction
  // (state indexed by bucket position ctx.offset + i).
  virtual void accumulate(std::span<const float> g, std::span<float> e, const EncodeContext& ctx);

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

// After a rank's own encode() of n floats, before anything reads the message: a size other
// than the fixed_message_bytes(n) the compressor promised (at the configured density), or
// above its max_message_bytes(n), is a compressor bug, fatal, naming the bucket and the
// compressor (a peer would refuse the size). An embedder's compressor that
// broke it was decoded into the residual unchecked, out of bounds (review, 2026-12-07).
void check_own_message_size(const Compressor& c, std::span<const std::uint8_t> msg, std::size_t n,
                            const EncodeContext& ctx);

// Decodes a message into a freshly zeroed vector: for tests and reference computations.
std::vector<float> decode_dense(const Compressor& c, std::span<const std::uint8_t> msg,
                                std::size_t n, const EncodeContext& ctx);

}  // namespace sparq::compress
