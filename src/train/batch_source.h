// BatchSource: one rank's stream of model Batches for training or evaluation, built from the
// data section of a TrainConfig on top of the data module's loaders (LM windows, BERT MLM
// sequences, CIFAR-10 or synthetic images).
//
// The loaders overwrite their batch on every call, but a step with gradient accumulation
// needs all of its micro-batches at once, so a source owns `slots` copies: next(slot) fills
// slot `slot` and returns views into it, valid until that slot is filled again.
//
// Determinism: the position in the data is the loader's LoaderState (epoch, step), saved in
// checkpoints; synthetic sources are regenerated from their seeds, so a resumed run sees the
// very same batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/markov_source.h"
#include "data/sampler.h"
#include "models/model.h"
#include "train/train_config.h"

namespace sparq::train {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch next(int slot) = 0;
  virtual data::LoaderState state() const = 0;
  virtual Status restore(const data::LoaderState& state) = 0;
  // Tokens (language models) or images in one micro-batch of one rank, for throughput.
  virtual std::int64_t items_per_batch() const = 0;
  virtual std::uint64_t steps_per_epoch() const = 0;
};

struct DataInfo {
  std::string description;      // one line for the start-up log
  // The data itself, without the path it was read from (a shard's size, tokenizer and
  // checksum): what a resume compares (same_data_key), so the same file named by another
  // path (a run resumed from another working directory) is the same data; the Markov
  // source's chain with its training token count (another count is other data: review,
  // 2026-12-07). Empty where the description is the identity.
  std::string identity;
  const std::string& same_data_key() const { return identity.empty() ? description : identity; }
  double entropy_rate = -1;     // nats per token for the Markov source and a causal LM, else -1
  // The lowest expected loss on the loader's rows (Note [A row's achievable loss],
  // data/markov_source.h): the entropy rate for order 1, above it for higher orders; -1 as
  // entropy_rate.
  double loss_bound = -1;
  int source_order = 0;  // the Markov source's order, when entropy_rate is set
  // The Markov source itself when its order is 1, so that evaluation can score the very
  // targets it evaluates under the true model (EvalMetrics::source_loss); else (and for BERT,
  // whose targets are masked tokens, not next tokens) null.
  std::shared_ptr<const data::MarkovChain> source;
  const char* unit = "tok";     // "tok" or "img"
  // The tokenizer named in a shard's header ("gpt2", "bert-uncased", "markov"); empty for
  // the in-memory Markov source and images. Weights trained on one tokenizer's ids meet
  // another's through it (Trainer::check_initial_weights_fit_data).
  std::string tokenizer;
};

// Whether the configured data source can feed the model at all (BERT's next-sentence head
// needs sentence pairs that no source makes); make_batch_source checks it first, and a dry
// run whose data files do not exist yet checks it alone.
Status check_source_feeds_model(const TrainConfig& config);

// `train` selects the training split (shuffled, augmented) or the evaluation split (in order,
// no augmentation). Missing files, a shard whose vocabulary exceeds the model's, or too
// little data for one global batch are errors naming the path and the config key.
Result<std::unique_ptr<BatchSource>> make_batch_source(const TrainConfig& config, bool train,
                                                       int rank, int world_size, int slots,
                                                       DataInfo* info = nullptr);

}  // namespace sparq::train
