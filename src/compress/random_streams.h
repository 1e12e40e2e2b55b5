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

}  // namespace sparq::compress
