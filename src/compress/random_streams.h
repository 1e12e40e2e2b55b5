// The Philox addressing of every random draw a compressor makes (stochastic rounding, random
// index sets, sampled thresholds). A draw is a pure function of (run seed, step, bucket,
// position in the bucket, and the rank for per-rank draws), never of thread count or call
// order, so that stochastic compressors are reproducible and a message can be re-derived
// anywhere (the GPU codecs of issue 17 must draw the same numbers).
#pragma once

#include <cstdint>

#include "compress/compressor.h"

namespace sparq::compress {

// The 64-bit Philox key for (seed, step): distinct steps get independent random streams.
std::uint64_t step_key(std::uint64_t seed, std::int64_t step);

// The Philox stream of a bucket's draws at ctx (bucket id and region offset folded in);
// rank-shared draws (randomk's index set, which every rank must agree on) pass rank = 0.
std::uint64_t compression_stream(const EncodeContext& ctx, int rank);

// Note [Server draws]
// two_phase with server compression: the owner of a region re-encodes the region's average
// at the same (step, bucket, offset) as its own phase-1 message of that region. Drawing from
// its rank's stream, both stochastic roundings would use the same uniform at each position,
// so their errors would be correlated and add up instead of partly cancelling. The re-encode
// (and the decode of its message) runs as rank world_size + owner, a stream no rank's own
// message uses. Rank-shared draws (randomk's index set) pass rank 0 and stay shared, so the
// server keeps phase 1's positions, where the average is nonzero.
EncodeContext server_encode_context(EncodeContext ctx);

// Note [Tree merge draws]
// The tree (gtopk_aggregator.h, device_tree.h) merges lists that merge by encode (lbs) by
// encoding the sum of two lists again at every round a rank receives. Under the rank's own
// context each of those encodes would round stochastically with the same uniforms as the
// rank's leaf message and its earlier merges, position by position, so the rounding errors
// of one path up the tree would be correlated (as Note [Server draws] says of two_phase) and
// bias which positions reach G. The merge of round s runs as rank world_size * (s + 2) + rank:
// no leaf (ranks 0..P-1), no two_phase server (P..2P-1) and no other (round, rank) shares it.
// A receiver decodes its peer's list under the context the peer last encoded it with
// (tree_list_context), and re-encodes at every round it has a peer, even one whose list was
// refused, so that context follows from the tree's shape alone. Rank-shared draws (rank 0)
// are not tree merges' concern: a merge by encode keeps a fixed k chosen exactly.
EncodeContext tree_merge_context(EncodeContext ctx, int round);

// The context `node`'s list was last encoded under before round `round` of a binomial tree
// of ctx.world_size ranks (Note [Tree merge draws]): the merge context of the latest earlier
// round in which it received a list, or its leaf context (rank = node) if none.
EncodeContext tree_list_context(EncodeContext ctx, int node, int round);
// The context of rank 0's list once the tree has run all its rounds: the one G is read from.
EncodeContext tree_root_context(EncodeContext ctx);

}  // namespace sparq::compress
