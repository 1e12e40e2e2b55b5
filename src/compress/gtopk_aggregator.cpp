#include "compress/gtopk_aggregator.h"

#include <algorithm>

#include "comm/gather.h"
#include "compress/quant_math.h"
#include "compress/random_streams.h"
#include "compress/sparse_format.h"
#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {

void GtopkAggregator::merge_and_reselect(std::size_t n, std::size_t k) {
  merged_indices_.clear();
  merged_values_.clear();
  std::size_t x = 0, y = 0;
  while (x < indices_.size() || y < peer_indices_.size()) {
    const bool take_x = y == peer_indices_.size() ||
                        (x < indices_.size() && indices_[x] <= peer_indices_[y]);
    const bool take_y = x == indices_.size() ||
                        (y < peer_indices_.size() && peer_indices_[y] <= indices_[x]);
    float v = 0.0f;
    std::uint32_t i = 0;
    if (take_x) v += values_[x], i = indices_[x++];
    if (take_y) v += peer_values_[y], i = peer_indices_[y++];
    merged_indices_.push_back(i);
    merged_values_.push_back(v);
  }
  // Note [The tree re-selects from the dense sum] (gtopk_aggregator.h).
  k = std::min(k, n);
  const std::size_t nonzero = static_cast<std::size_t>(
      std::count_if(merged_values_.begin(), merged_values_.end(), [](float v) { return v != 0; }));
  if (nonzero >= k) {
    // The k-th magnitude is above zero, so the union holds every entry the dense sum's top-k
    // takes, and ties among them go to the lowest index in both.
    selector_.exact(merged_values_, k, selected_);
    indices_.resize(selected_.size());
    values_.resize(selected_.size());
    for (std::size_t j = 0; j < selected_.size(); ++j) {
      indices_[j] = merged_indices_[selected_[j]];
      values_[j] = merged_values_[selected_[j]];
    }
  } else {
    // Every non-zero sum, and the lowest-index zeros of the BUCKET (a zero sum in the union or
    // an index in neither list) up to k, ascending: at most 2k + k indices are walked.
    indices_.clear();
    values_.clear();
    std::size_t zeros = k - nonzero, m = 0;
    for (std::uint32_t i = 0; zeros > 0; ++i) {
      const bool listed = m < merged_indices_.size() && merged_indices_[m] == i;
      const float v = listed ? merged_values_[m++] : 0.0f;
      if (v == 0) --zeros;
      indices_.push_back(i);
      values_.push_back(v);
    }
    for (; m < merged_indices_.size(); ++m) {
      if (merged_values_[m] == 0) continue;
      indices_.push_back(merged_indices_[m]);
      values_.push_back(merged_values_[m]);
    }
  }
  encode_sparse_pairs(indices_, values_, n, msg_);
}

void GtopkAggregator::merge_by_encode(Compressor& c, std::size_t n, const EncodeContext& own,
                                      const EncodeContext* from, const EncodeContext& merged) {
  // As the device tree: both lists decoded into one dense sum (0 + own + peer, in that
  // order), whose top-k is encoded again under the round's merge context (Note [Tree merge
  // draws]); a refused peer list (from == nullptr) adds nothing.
  // Each list's positions that decode to 0 are marked after its decode (Note [Listed zeros],
  // quant_math.h; without it G filled with the bucket's lowest indices at low bits: review,
  // 2026-12-06). A later add of a real value to the mark rounds to that value exactly.
  dense_.assign(n, 0.0f);
  c.decode(msg_, dense_, 1.0f, DecodeMode::kAdd, own);
  mark_listed_zeros(msg_, n);
  if (from != nullptr) {
    c.decode(peer_msg_, dense_, 1.0f, DecodeMode::kAdd, *from);
    mark_listed_zeros(peer_msg_, n);
  }
  c.encode(dense_, merged, msg_);
  list_indices(msg_, n, indices_);
}

void GtopkAggregator::mark_listed_zeros(std::span<const std::uint8_t> msg, std::size_t n) {
  list_indices(msg, n, listed_);
  for (std::uint32_t i : listed_) {
    if (dense_[i] == 0.0f) dense_[i] = kListedZero;
  }
}

void GtopkAggregator::list_indices(std::span<const std::uint8_t> msg, std::size_t n,
                                   std::vector<std::uint32_t>& out) {
  // Trusted lists only (this rank's own encode): the value width is read from the header.
  SPARQ_CHECK(msg.size() >= kSparseHeaderBytes, "tree: a list of {} bytes has no header",
              msg.size());
  const SparseHeader h = read_sparse_header(msg, n, msg[9], "tree");
  out.resize(h.count);
  for_each_index(h, msg.data() + kSparseHeaderBytes, n,
                 [&](std::uint32_t j, std::uint32_t i) { out[j] = i; });
}

Status GtopkAggregator::run(std::span<float> bucket, Compressor& c, ErrorFeedback* ef,
                            comm::Communicator& comm, const EncodeContext& ctx_in) {
  const std::size_t n = bucket.size();
  const int p = comm.size(), rank = comm.rank();
  EncodeContext ctx = ctx_in;
  ctx.rank = rank;
  ctx.world_size = p;
  ctx.offset = 0;

  // a = g + e, formed in the residual (or a scratch copy without error feedback).
  std::span<float> a;
  if (ef) {
    SPARQ_CHECK(ef->residual().size() == n, "tree: residual of {} for a bucket of {}",
                ef->residual().size(), n);
    a = ef->accumulate(c, bucket, 0, ctx);
  } else {
    scratch_.assign(bucket.begin(), bucket.end());
    a = scratch_;
  }
  c.encode(a, ctx, msg_);
  payload_bytes_ = msg_.size();
  // sparse f32 lists merge as (index, value) pairs; lbs's by decode and encode (Note [The
  // tree re-selects from the dense sum]).
  const bool by_encode = tree_merges_by_encode(c.capabilities());
  if (by_encode) {
    list_indices(msg_, n, indices_);
  } else {
    parse_sparse_f32(msg_, n, indices_, values_, c.name());
  }
  std::int64_t k = static_cast<std::int64_t>(indices_.size());
  Status failure;
  comm.broadcast(&k, 1, DType::kI64, 0);  // rank 0's k rules (equal for topk-style configs)
  comm::checked_peer_size(k, n, 0, "the kept count");

  // The payload counts each list this rank encodes once: its own (above), and a merged
  // list when it sends one up; its own list sent unmerged was counted twice (review,
  // 2026-12-07).
  bool merged = false;
  for (int dist = 1, round = 0; dist < p; dist <<= 1, ++round) {
    if (rank % (2 * dist) == dist) {
      std::int64_t bytes = static_cast<std::int64_t>(msg_.size());
      comm.send(&bytes, 1, DType::kI64, rank - dist, round);
      comm.send(msg_.data(), msg_.size(), DType::kU8, rank - dist, round);
      if (merged) payload_bytes_ += msg_.size();
      break;
    }
    if (rank % (2 * dist) == 0 && rank + dist < p) {
      std::int64_t bytes = 0;
      comm.recv(&bytes, 1, DType::kI64, rank + dist, round);
      peer_msg_.resize(
          comm::checked_peer_size(bytes, c.max_message_bytes(n), rank + dist, "its tree list"));
      comm.recv(peer_msg_.data(), peer_msg_.size(), DType::kU8, rank + dist, round);
      // A bad list is skipped (the tree and the agreed exchange still complete on every
      // rank) and reported at the end.
      const EncodeContext from = tree_list_context(ctx, rank + dist, round);
      const Status s = check_received(c, peer_msg_, n, from, fmt::format("rank {}", rank + dist));
      if (!s.is_ok() && failure.is_ok()) failure = s;
      if (by_encode) {
        // Re-encoded even without the peer's list, so that what this rank sends next was
        // encoded under the context its receiver expects (Note [Tree merge draws]).
        merge_by_encode(c, n, tree_list_context(ctx, rank, round), s.is_ok() ? &from : nullptr,
                        tree_merge_context(ctx, round));
        merged = true;
      } else if (s.is_ok()) {
        parse_sparse_f32(peer_msg_, n, peer_indices_, peer_values_, c.name());
        merge_and_reselect(n, static_cast<std::size_t>(k));
        merged = true;
      }
    }
  }

  std::int64_t count = rank == 0 ? static_cast<std::int64_t>(indices_.size()) : 0;
  comm.broadcast(&count, 1, DType::kI64, 0);
  global_.resize(comm::checked_peer_size(count, n, 0, "the global index count"));
  if (rank == 0) global_ = indices_;
  comm.broadcast(global_.data(), global_.size(), DType::kI32, 0);

  values_.resize(global_.size());
  for (std::size_t j = 0; j < global_.size(); ++j) {
    SPARQ_CHECK(global_[j] < n, "tree: global index {} outside a bucket of {}", global_[j], n);
    values_[j] = a[global_[j]];
  }
  comm.allreduce(values_.data(), values_.data(), values_.size(), DType::kF32,
                 comm::ReduceOp::kSum);
  payload_bytes_ += 4 * values_.size();
  if (ef) {
    // This rank's applied contribution is a on G (D(m_r) in the header): the sent entries.
    if (SendHistory* history = ef->send_history()) {
      for (std::uint32_t i : global_) {
        if (a[i] != 0.0f) history->mark(i);
      }
    }
    for (std::uint32_t i : global_) a[i] = 0.0f;  // applied in full; the rest stays in e
  }
  ops::fill(bucket.data(), n, 0.0f);
  const float inv_p = 1.0f / static_cast<float>(p);
  for (std::size_t j = 0; j < global_.size(); ++j) bucket[global_[j]] = values_[j] * inv_p;
  return failure;
}

}  // namespace sparq::compress
