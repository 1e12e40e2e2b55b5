// BERT masked-language-model batches from a WordPiece token stream whose documents are
// separated by [SEP] (what prepare_data --tokenizer wordpiece writes).
//
// Sequences: each document is cut into consecutive pieces of at most max_len - 2 tokens;
// a sequence is [CLS] piece [SEP], padded with [PAD] to max_len. Sequences are distributed
// by EpochSampler (sampler.h) like LM windows.
//
// Masking (dynamic: redrawn every epoch, as in RoBERTa): every piece token is chosen with
// probability mask_prob (0.15); a chosen token becomes [MASK] with probability 0.8, a
// uniformly random vocabulary id with probability 0.1, and stays itself otherwise. Its label
// is the original id; every other position (specials, padding, unchosen) has label
// kIgnoreLabel. The draws for position p of sequence s in epoch e come from
// philox4x32(seed, data_stream(kMask, e), s * max_len + p), so they do not depend on the
// rank, the world size, or the order in which batches are taken.
//
// Evaluation (fixed_masks) draws its masks once, from philox(kEvalMaskSeed,
// data_stream(kEvalMask, 0), s * max_len + p): the same positions whatever train.seed and
// however many epochs, and never training's own masks. With the training seed, runs that
// differed only in seed were scored on different masked positions (noise in every comparison
// of seeds), and with no data.eval the eval set was training's epoch 0 (review, 2026-12-07).
#pragma once

#include <memory>

#include "core/buffer.h"
#include "core/tensor.h"
#include "data/sampler.h"
#include "data/token_source.h"

namespace sparq::data {

struct MlmLoaderConfig {
  int max_len = 128;
  float mask_prob = 0.15f;
  float mask_token_prob = 0.8f;    // of the chosen: replaced by [MASK]
  float random_token_prob = 0.1f;  // of the chosen: replaced by a random id
  std::uint32_t cls_id = 0, sep_id = 0, mask_id = 0, pad_id = 0;
  SamplerConfig sampler;
  bool fixed_masks = false;  // evaluation's masks (above); training redraws every epoch
};
inline constexpr std::uint64_t kEvalMaskSeed = 0;

// kIgnoreLabel is sampler.h's.

struct MlmBatch {
  Tensor input_ids;                      // i32 [micro_batch, max_len]
  Tensor token_type_ids;                 // i32 [micro_batch, max_len], all 0 (single segment)
  Tensor attention_mask;                 // i32 [micro_batch, max_len], 1 = real token, 0 = padding
  Tensor labels;                         // i32 [micro_batch, max_len], original id or kIgnoreLabel
  std::vector<std::uint64_t> sequences;  // sequence index of each row, or kPaddingItem
};

class MlmLoader {
 public:
  static Result<MlmLoader> create(std::shared_ptr<const TokenSource> source,
                                  const MlmLoaderConfig& config);

  const MlmBatch& next();
  std::uint64_t num_sequences() const { return sampler_.num_items(); }
  std::uint64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  LoaderState state() const { return sampler_.state(); }
  Status restore(const LoaderState& state) { return sampler_.restore(state); }

 private:
  MlmLoader(std::shared_ptr<const TokenSource> source, MlmLoaderConfig config, EpochSampler sampler,
            std::vector<std::uint64_t> starts, std::vector<std::uint32_t> lengths);

  std::shared_ptr<const TokenSource> source_;
  MlmLoaderConfig config_;
  EpochSampler sampler_;
  std::vector<std::uint64_t> starts_;   // first stream token of each sequence's piece
  std::vector<std::uint32_t> lengths_;  // piece length (<= max_len - 2)
  Buffer buffer_;                       // the four tensors, back to back
  std::vector<std::uint32_t> piece_;
  MlmBatch batch_;
};

}  // namespace sparq::data
