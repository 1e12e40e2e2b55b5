#include "compress/random_streams.h"

#include <bit>
#include <limits>

#include "core/check.h"
#include "core/rng.h"

namespace sparq::compress {

std::uint64_t step_key(std::uint64_t seed, std::int64_t step) {
  // splitmix64 of (seed, step): nearby steps get unrelated Philox keys.
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(step) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t compression_stream(const EncodeContext& ctx, int rank) {
  // Regions of one bucket (two_phase) must not share draws: fold the offset into the index.
  const auto index = static_cast<std::uint32_t>(ctx.bucket_id ^ (ctx.offset * 0x9E3779B1u));
  return make_stream(RngPurpose::kCompression, static_cast<std::uint32_t>(rank), index);
}

EncodeContext server_encode_context(EncodeContext ctx) {
  ctx.rank += ctx.world_size;  // Note [Server draws]
  return ctx;
}

EncodeContext tree_merge_context(EncodeContext ctx, int round) {
  SPARQ_CHECK(round >= 0 && round < 31, "tree merge round {} out of range", round);
  const std::int64_t rank = static_cast<std::int64_t>(ctx.world_size) * (round + 2) + ctx.rank;
  SPARQ_CHECK(rank <= std::numeric_limits<int>::max(),
              "tree merge stream of rank {} at round {} of {} ranks", ctx.rank, round,
              ctx.world_size);
  ctx.rank = static_cast<int>(rank);  // Note [Tree merge draws]
  return ctx;
}

EncodeContext tree_list_context(EncodeContext ctx, int node, int round) {
  ctx.rank = node;
  // node receives in round s when it is a multiple of 2^(s+1) with a peer node + 2^s.
  for (int s = round - 1; s >= 0; --s) {
    const std::int64_t dist = std::int64_t{1} << s;
    if (node % (2 * dist) == 0 && node + dist < ctx.world_size) {
      return tree_merge_context(ctx, s);
    }
  }
  return ctx;
}

EncodeContext tree_root_context(EncodeContext ctx) {
  // ceil(log2 P) rounds: bit_width(P - 1).
  const int rounds = static_cast<int>(std::bit_width(static_cast<unsigned>(ctx.world_size - 1)));
  return tree_list_context(ctx, 0, rounds);
}

}  // namespace sparq::compress
