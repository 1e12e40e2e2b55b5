// Causal language-model batches from a token stream.
//
// The stream is cut into N = (size - 1) / T windows of T + 1 tokens; window w covers tokens
// [w*T, w*T + T], so consecutive windows share one boundary token and every token of
// [1, N*T] is a target at most once per epoch (exactly once unless its window falls in the
// incomplete last global batch, which the sampler drops). Windows are distributed by EpochSampler
// (sampler.h): shuffled per epoch, a disjoint share for each rank, none reused within an
// epoch. For window w: inputs = tokens [w*T, w*T + T), targets = tokens [w*T + 1, w*T + T].
#pragma once

#include <memory>

#include "core/buffer.h"
#include "core/tensor.h"
#include "data/sampler.h"
#include "data/token_source.h"

namespace sparq::data {

struct LmLoaderConfig {
  int seq_len = 1024;  // T
  SamplerConfig sampler;
};

// A batch owned by its loader and overwritten by the next call to next().
struct LmBatch {
  Tensor inputs;                       // i32 [micro_batch, T]
  Tensor targets;                      // i32 [micro_batch, T]
  std::vector<std::uint64_t> windows;  // window index of each row, or kPaddingItem
};

class LmLoader {
 public:
  static Result<LmLoader> create(std::shared_ptr<const TokenSource> source,
                                 const LmLoaderConfig& config);

  const LmBatch& next();
  std::uint64_t num_windows() const { return sampler_.num_items(); }
  std::uint64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  LoaderState state() const { return sampler_.state(); }
  Status restore(const LoaderState& state) { return sampler_.restore(state); }

 private:
  LmLoader(std::shared_ptr<const TokenSource> source, LmLoaderConfig config, EpochSampler sampler);

  std::shared_ptr<const TokenSource> source_;
  LmLoaderConfig config_;
  EpochSampler sampler_;
  Buffer input_buf_, target_buf_;
  std::vector<std::uint32_t> window_;
  LmBatch batch_;
};

}  // namespace sparq::data
