#include "block_randomk.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace example {
namespace {

// splitmix64: a small, well-mixed generator; the same seed gives the same blocks everywhere.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::size_t block_count(std::size_t n, std::size_t block) { return (n + block - 1) / block; }

}  // namespace

std::size_t BlockRandomk::kept_count(std::size_t n) const {
  const std::size_t blocks = block_count(n, o_.block);
  const auto k = static_cast<std::size_t>(std::llround(o_.density * static_cast<double>(blocks)));
  return std::clamp<std::size_t>(k, 1, blocks);
}

std::vector<std::size_t> BlockRandomk::kept_blocks(
    std::size_t n, const sparq::compress::EncodeContext& ctx) const {
  const std::size_t blocks = block_count(n, o_.block), k = kept_count(n);
  // Keyed by the span's offset in the bucket too (EncodeContext): two_phase encodes each
  // region on its own, and without it every region kept the same relative blocks, on every
  // step (review, 2026-12-06). The offset goes through one mixing round of its own, so that
  // it cannot cancel the step's or the bucket's bits.
  std::uint64_t offset_state = static_cast<std::uint64_t>(ctx.offset);
  std::uint64_t state = ctx.seed ^ (static_cast<std::uint64_t>(ctx.step) << 20) ^
                        (static_cast<std::uint64_t>(ctx.bucket_id) << 48) ^
                        splitmix64(offset_state);
  // A partial Fisher-Yates shuffle of the block indices: k distinct blocks.
  std::vector<std::size_t> order(blocks);
  for (std::size_t i = 0; i < blocks; ++i) order[i] = i;
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t j = i + splitmix64(state) % (blocks - i);
    std::swap(order[i], order[j]);
  }
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

std::optional<std::size_t> BlockRandomk::fixed_message_bytes(std::size_t n) const {
  return kept_count(n) * o_.block * sizeof(float);
}

void BlockRandomk::encode(std::span<const float> a, const sparq::compress::EncodeContext& ctx,
                          sparq::compress::Message& msg) {
  const std::size_t n = a.size();
  msg.assign(*fixed_message_bytes(n), 0);
  std::size_t at = 0;
  for (std::size_t b : kept_blocks(n, ctx)) {
    const std::size_t first = b * o_.block, count = std::min(o_.block, n - first);
    std::memcpy(msg.data() + at, a.data() + first, count * sizeof(float));
    at += o_.block * sizeof(float);  // the last block's padding stays zero
  }
}

sparq::Status BlockRandomk::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                                          const sparq::compress::EncodeContext&) const {
  // Every byte pattern of the right size decodes in bounds: the size is the whole check.
  return sparq::compress::check_message_size(*this, msg, n, *fixed_message_bytes(n));
}

void BlockRandomk::decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                          sparq::compress::DecodeMode mode,
                          const sparq::compress::EncodeContext& ctx) const {
  const std::size_t n = out.size();
  if (mode == sparq::compress::DecodeMode::kSet) std::fill(out.begin(), out.end(), 0.0f);
  std::size_t at = 0;
  for (std::size_t b : kept_blocks(n, ctx)) {
    const std::size_t first = b * o_.block, count = std::min(o_.block, n - first);
    for (std::size_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, msg.data() + at + i * sizeof(float), sizeof(float));
      out[first + i] += alpha * v;
    }
    at += o_.block * sizeof(float);
  }
}

void BlockRandomk::accumulate(std::span<const float> g, std::span<float> e,
                              const sparq::compress::EncodeContext&) {
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = o_.residual_decay * e[i] + g[i];
}

sparq::Status register_block_randomk() {
  using sparq::compress::Compressor;
  using sparq::compress::ConfigReader;
  return sparq::compress::register_compressor(
      {.name = "block_randomk",
       .summary = "random blocks shared by all ranks, allreduced; decaying error feedback",
       .keys = {{"density", "fraction of blocks kept, (0, 1], default 0.05"},
                {"block", "values per block, [1, 65536], default 64"},
                {"residual_decay", "weight of the residual in a = g + decay * e, [0, 1], default 1"}},
       .factory = [](ConfigReader& r) -> sparq::Result<std::unique_ptr<Compressor>> {
         BlockRandomkOptions o;
         SPARQ_ASSIGN_OR_RETURN(o.density, r.real("density", 0.05, 0.0, 1.0, /*lo_open=*/true));
         SPARQ_ASSIGN_OR_RETURN(std::int64_t block, r.integer("block", 64, 1, 65536));
         SPARQ_ASSIGN_OR_RETURN(double decay, r.real("residual_decay", 1.0, 0.0, 1.0));
         o.block = static_cast<std::size_t>(block);
         o.residual_decay = static_cast<float>(decay);
         return std::unique_ptr<Compressor>(std::make_unique<BlockRandomk>(o));
       }});
}

}  // namespace example
