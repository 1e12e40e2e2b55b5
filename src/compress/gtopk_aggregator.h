// tree (gTop-k, Shi et al. 2019): agree on ONE global set of k indices, then average every
// rank's values on that set.
//   1. a = g + e; each rank encodes its local top-k (a sparse f32 message, sparse_format.h).
//   2. Binomial-tree reduction to rank 0 over ceil(log2 P) rounds (any P): in round s, rank
//      r with r mod 2^(s+1) == 2^s sends its current list to r - 2^s (size as one i64, then
//      the message bytes, tag s); the receiver merges the two lists (values summed on common
//      indices) and re-selects the k largest |value| (Note [The tree re-selects from the
//      dense sum]).
//   3. Rank 0 broadcasts the k global indices (an i64 count, then u32 indices).
//   4. Every rank contributes a[G] (k f32) to one allreduce; bucket = sum / P on G, 0 off G.
//   5. Error feedback: e = a with e[G] = 0. What a rank selected locally but the tree
//      dropped was never applied and stays in e; a[G] was applied in full (also where it was
//      not in the local top-k), so D(m_r) = a_r restricted to G and mass is conserved exactly.
// Works with any compressor producing sparse f32 messages (gtopk, topk, topk_sampled), whose
// lists merge as (index, value) pairs, and with those that merge by encode
// (CompressorCapabilities::merges_by_encode: lbs with exact selection), whose lists are
// decoded into a dense sum and encoded again, re-quantized at each merge; their values only
// choose G, and step 4 sends a[G] exactly either way. k is the size of rank 0's local list.
//
// Note [The tree re-selects from the dense sum]
// A receiver keeps the top-k of the two lists' sum as a dense vector over the bucket (zero off
// the lists), with ties to the lowest index: the local encode's rule, and what the device tree
// computes (device_tree.h: it decodes both lists into a dense scratch and encodes its top-k).
// While the lists' sum has k non-zero values this is the top-k of the union; with fewer (sums
// that cancel, or lists of zeros) the remaining places go to the bucket's lowest-index zeros,
// which may lie outside both lists. Selecting among the union only (before 2026-12-06) gave
// the lowest zeros of the union there, so the CPU and the GPU agreed on different sets G.
// For lists that merge by encode (lbs), a kept value below half a code step of its block's
// largest (1/14 of it at 4 bits, 1/2 at 2 bits) decodes to 0, and would then tie with the
// positions no rank listed: with heavy-tailed gradients the sums held fewer than k non-zeros
// and G filled with the bucket's lowest indices (a review measured 593 of 655 at 2 bits on
// Student-t gradients). Listed positions that decode to 0 are therefore marked (Note [Listed
// zeros], quant_math.h) on the CPU and the device alike, and rank above unlisted ones. Each
// merge encodes under its own round's stream (Note [Tree merge draws], random_streams.h).
#pragma once

#include "compress/aggregation.h"
#include "compress/topk_select.h"

namespace sparq::compress {

class GtopkAggregator final : public Aggregator {
 public:
  std::string_view name() const override { return "tree"; }
  Status run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef, comm::Communicator& comm,
             const EncodeContext& ctx) override;

  // The global index set of the last run (ascending), identical on every rank.
  const std::vector<std::uint32_t>& global_indices() const { return global_; }

 private:
  void merge_and_reselect(std::size_t n, std::size_t k);
  // msg_ := the encode under `merged` of D(msg_) + D(peer_msg_) (the peer's list left out
  // when from is null); indices_ := its kept indices.
  void merge_by_encode(Compressor& c, std::size_t n, const EncodeContext& own,
                       const EncodeContext* from, const EncodeContext& merged);
  static void list_indices(std::span<const std::uint8_t> msg, std::size_t n,
                           std::vector<std::uint32_t>& out);
  // dense_[i] := kListedZero where msg lists i and dense_[i] is 0 (Note [Listed zeros]).
  void mark_listed_zeros(std::span<const std::uint8_t> msg, std::size_t n);

  TopkSelector selector_;
  Message msg_, peer_msg_;
  std::vector<float> scratch_, values_, peer_values_, merged_values_, dense_;
  std::vector<std::uint32_t> indices_, peer_indices_, merged_indices_, selected_, global_, listed_;
};

}  // namespace sparq::compress
