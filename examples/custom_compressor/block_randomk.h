// block_randomk: a compressor defined outside sparq. Each step it keeps a random `density`
// fraction of the bucket's blocks of `block` values, the SAME blocks on every rank (they are
// drawn from the step, the bucket and the run's seed, all rank-identical), so the messages can
// be summed elementwise: it aggregates by allreduce, and a message is exactly the kept
// blocks' values as f32 (the last block zero-padded).
//
// Its own error feedback: accumulate() forms a = g + residual_decay * e instead of the plain
// a = g + e, so residual_decay < 1 lets old, never-sent mass fade (1 = classic error
// feedback). The residual itself is sparq's (compress.error_feedback: true).
//
// Keys, under compress.block_randomk: density (0.05), block (64), residual_decay (1).
#pragma once

#include <cstdint>
#include <sparq/compressor.h>
#include <vector>

namespace example {

struct BlockRandomkOptions {
  double density = 0.05;
  std::size_t block = 64;
  float residual_decay = 1.0f;
};

class BlockRandomk final : public sparq::compress::Compressor {
 public:
  explicit BlockRandomk(BlockRandomkOptions options) : o_(options) {}

  std::string_view name() const override { return "block_randomk"; }
  sparq::compress::Aggregation aggregation() const override {
    return sparq::compress::Aggregation::kAllreduce;
  }
  sparq::DType wire_dtype() const override { return sparq::DType::kF32; }
  // Declared, not inferred: the kept blocks are the same on every rank, so the messages sum
  // (allreduce) and each also decodes on its own (allgather, two_phase).
  sparq::compress::CompressorCapabilities capabilities() const override {
    return {.summable = true, .self_contained = true};
  }

  void encode(std::span<const float> a, const sparq::compress::EncodeContext& ctx,
              sparq::compress::Message& msg) override;
  sparq::Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                              const sparq::compress::EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              sparq::compress::DecodeMode mode,
              const sparq::compress::EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override;
  double contraction_delta(std::size_t) const override { return 0.0; }  // random: no bound
  void accumulate(std::span<const float> g, std::span<float> e,
                  const sparq::compress::EncodeContext& ctx) override;

 private:
  // The kept blocks of a bucket of n floats at this step, ascending.
  std::vector<std::size_t> kept_blocks(std::size_t n,
                                       const sparq::compress::EncodeContext& ctx) const;
  std::size_t kept_count(std::size_t n) const;

  BlockRandomkOptions o_;
};

// Adds block_randomk to sparq's registry (call once, before the config is read).
sparq::Status register_block_randomk();

}  // namespace example
