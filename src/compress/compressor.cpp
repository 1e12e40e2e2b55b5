#include "compress/compressor.h"

#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {

std::string_view aggregation_name(Aggregation a) {
  switch (a) {
    case Aggregation::kAllreduce: return "allreduce";
    case Aggregation::kAllgather: return "allgather";
    case Aggregation::kTwoPhase: return "two_phase";
    case Aggregation::kTree: return "tree";
  }
  return "?";
}

Result<Aggregation> parse_aggregation(const std::string& text, const std::string& key) {
  for (Aggregation a : {Aggregation::kAllreduce, Aggregation::kAllgather, Aggregation::kTwoPhase,
                        Aggregation::kTree}) {
    if (aggregation_name(a) == text) return a;
  }
  return Status::error("{}: unknown aggregation '{}' (allreduce, allgather, two_phase, tree)",
                       key, text);
}

void Compressor::accumulate(std::span<const float> g, std::span<float> e,
                            const EncodeContext&) {
  SPARQ_CHECK(g.size() == e.size(), "accumulate: {} gradients for {} residuals", g.size(),
              e.size());
  ops::axpy(1.0f, g.data(), e.data(), e.size());
}

std::vector<float> decode_dense(const Compressor& c, std::span<const std::uint8_t> msg,
                                std::size_t n, const EncodeContext& ctx) {
  std::vector<float> out(n, 0.0f);
  c.decode(msg, out, 1.0f, DecodeMode::kSet, ctx);
  return out;
}

std::uint64_t step_key(std::uint64_t seed, std::int64_t step) {
  // splitmix64 of (seed, step): nearby steps get unrelated Philox keys.
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(step) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace sparq::compress
