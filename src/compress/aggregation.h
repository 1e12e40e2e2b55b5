// Aggregation strategies: compress -> exchange -> decompress, in place, for one bucket.
//
//   bucket (this rank's gradient range, n floats)  ==>  (1/P) sum over ranks r of D(m_r)
//
// where m_r is rank r's message (encoded from a_r = g_r + e_r when error feedback is on),
// so every rank ends with the same floats. Strategies:
//   allreduce  m_r summable (wire_dtype): one allreduce of the messages, then decode the sum
//              with alpha = 1/P. Requires CompressorCapabilities::summable.
//   allgather  exchange sizes (skipped when fixed_message_bytes is known), allgatherv of the
//              bytes, then decode every rank's message in rank order with alpha = 1/P.
//   two_phase  the bucket is cut into P regions [j n / P, (j + 1) n / P); each rank encodes
//              every region separately and sends region j's message to rank j (alltoallv);
//              rank j decodes and averages them, then (server compression on) re-encodes the
//              average plus its server-side residual with the same compressor (1-bit Adam /
//              Ok-Topk style), or (off) sends the average as dense f32; allgatherv of the
//              region results, which every rank decodes into its region. With server
//              compression off the result equals allgather's, float for float, only for a
//              codec that treats each position alone, or blocks that the regions do not cut
//              (blockquant with aligned regions): selection (topk, lbs, dgc, randomk) and
//              scales (sign codecs, terngrad, qsgd) are per encoded span, hence per region.
//   tree       gtopk (gtopk_aggregator.h).
//   low_rank   powersgd's factor exchange, two dependent allreduces (powersgd_aggregator.h).
// Which compressors each accepts is decided by their CompressorCapabilities
// (aggregation_registry.cpp), never by name.
//
// Ownership: an Aggregator belongs to one bucket (two_phase keeps that bucket's server
// residual); it borrows the compressor, the residual and the communicator for each call.
// All ranks call run() for the same bucket with the same n, the same compressor configuration
// and the same ctx.seed/step/bucket_id (Note [Rank-identical collective order],
// communicator.h); a rank whose message is empty still takes part.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "compress/compressor.h"
#include "compress/error_feedback.h"

namespace sparq::compress {

struct AggregatorOptions {
  bool server_compression = true;  // two_phase: re-compress the region average
};

class Aggregator {
 public:
  virtual ~Aggregator() = default;
  // The registered strategy name (allreduce, allgather, two_phase, tree, low_rank or an
  // external one).
  virtual std::string_view name() const = 0;

  // Replaces `bucket` by the average of all ranks' decoded contributions. `ef` may be null
  // (no error feedback); otherwise its residual covers exactly the bucket. ctx.rank and
  // ctx.world_size are taken from `comm`. Every received message goes through
  // Compressor::check_message() first; a bad one is an error naming the bucket, the
  // compressor and the sender ("bucket 3 (topk): message from rank 1: index 70000 out of
  // range for 1000 floats"). The strategy still finishes its collectives (a bad message
  // counts as zero), so no rank is left waiting; `bucket` is then unspecified.
  virtual Status run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef,
                     comm::Communicator& comm, const EncodeContext& ctx) = 0;
  // What the registration's accepts() cannot judge because it depends on this strategy's
  // options (two_phase's server compression); make_aggregator() calls it. Default: nothing.
  virtual Status check_compressor(const Compressor& /*c*/) const { return Status::ok(); }

  // Bytes of the compressed payload this rank encoded during the last run (all phases), the
  // numerator of the compression ratio against 4 n (docs/compress.md, "Aggregation
  // strategies"). Not the wire: the tree's root counts its own list, which it never sends,
  // and not the global index list it broadcasts; the bytes on the wire are the byte model's
  // (metrics bytes_sent, comm/byte_model.h).
  std::size_t last_payload_bytes() const { return payload_bytes_; }

  // Strategy state beyond the compressor and the client residual (two_phase: the server
  // residual of this rank's region). Empty for stateless strategies.
  virtual void save_state(std::vector<std::uint8_t>& out) const { out.clear(); }
  virtual Status load_state(std::span<const std::uint8_t> in);
  // Elastic resume: how the states saved by the ranks of another world size become this
  // rank's (state_merge.h). The default resets any non-empty state with a warning.
  virtual std::unique_ptr<StateMerge> state_merge(const MergeShape& shape) const;

 protected:
  // Every run() sets it (a strategy outside sparq too): the metrics' payload_bytes and the
  // compression ratio read it, and one left at 0 reports nothing sent.
  std::size_t payload_bytes_ = 0;
};

// Builds the built-in strategy for `kind`; the caller usually passes compressor.aggregation().
std::unique_ptr<Aggregator> make_aggregator(Aggregation kind, AggregatorOptions options = {});

// The aggregation registry: compress.aggregation selects a strategy by name. The built-ins
// (allreduce, allgather, two_phase, tree, low_rank) are registered the same way as an external one
// (Note [One registration path], registry.h); include/sparq/aggregation.h is the public header.
struct AggregationRegistration {
  std::string name;     // [a-z][a-z0-9_]*, unique; "auto" is reserved (the compressor's own)
  std::string summary;  // one line for sparq_info
  // Whether the strategy can carry compressor c's messages, decided from
  // c.capabilities(); an error saying why not (the caller prefixes the config key). Empty:
  // every compressor.
  std::function<Status(const Compressor& c)> accepts;
  std::function<std::unique_ptr<Aggregator>(const AggregatorOptions&)> factory;
};
Status register_aggregation(AggregationRegistration registration);
// Built-ins first, then the others in registration order.
std::vector<std::string> aggregation_names();
// Strategy `name` for compressor c ("auto": c.aggregation()). Errors (an unknown name, a
// strategy that refuses c) name `key`.
Result<std::unique_ptr<Aggregator>> make_aggregator(std::string_view name, const Compressor& c,
                                                    const AggregatorOptions& options,
                                                    const std::string& key);
// Whether `name` is "auto" or registered; the error names `key` and lists the known names.
Status check_aggregation_name(std::string_view name, const std::string& key);

// check_message() of a message for n floats that `sender` ("rank 1", "the allreduce")
// produced under `from`, with the bucket and the compressor named in the error.
Status check_received(const Compressor& c, std::span<const std::uint8_t> msg, std::size_t n,
                      const EncodeContext& from, std::string_view sender);

// Encodes with or without error feedback: the one place strategies form a = g + e.
void encode_maybe_ef(Compressor& c, ErrorFeedback* ef, std::span<const float> g,
                     std::size_t offset, const EncodeContext& ctx, Message& msg);

}  // namespace sparq::compress
