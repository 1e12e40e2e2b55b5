// Per-rank, seeded, resumable batch sampling shared by every loader.
//
// An epoch is a permutation of the dataset's items (a seeded Fisher-Yates shuffle that is
// identical on every rank, or the identity when shuffle is off). Step s of the epoch takes
// the global batch perm[s*G, (s+1)*G) with G = micro_batch * world_size, and rank r gets
// the contiguous share perm[s*G + r*micro_batch, ... + micro_batch). So the ranks' shares
// are disjoint, together they are the global batch, and no item repeats within an epoch.
// The last incomplete global batch of an epoch is dropped; the next epoch reshuffles.
//
// Everything that varies during training is (epoch, position), position = the items of the
// epoch's permutation already consumed (step * G while the world size is fixed): LoaderState
// is what a checkpoint stores, and restoring it reproduces the very next batch exactly.
//
// Elastic resume (docs/reliability.md, "Elastic resume"): the position is global, so a world
// of another size continues at the same item: its next global batch is perm[position,
// position + G'). When fewer than G' items are left in the epoch, the epoch ends there (its
// tail is dropped, as at every epoch end) and the next one starts at item 0.
//
// Evaluation (pad_last_batch) covers every item exactly once instead: an epoch is
// ceil(N / G) global batches, and the places of the last one past item N - 1 hold
// kPaddingItem, which loaders turn into rows whose targets are all kIgnoreLabel (they count
// nothing). So an eval set smaller than one global batch still evaluates, and one that is
// smaller than train.eval_batches global batches is never scored twice.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"

namespace sparq::data {

struct LoaderState {
  std::uint64_t seed = 0;  // must match the loader's configured seed on restore
  std::uint64_t epoch = 0;
  std::uint64_t step = 0;  // batches already taken in this epoch (of this world's size)
  // Items of the epoch already consumed by all ranks together. Unset in states written
  // before it existed: restore() then takes step * G of its own world.
  std::optional<std::uint64_t> position = std::nullopt;
};

// The item index next() gives for a place past the end of an evaluation epoch.
inline constexpr std::uint64_t kPaddingItem = ~std::uint64_t{0};
// The target or label of a position that counts nothing (the models' kIgnoreIndex).
inline constexpr std::int32_t kIgnoreLabel = -100;

struct SamplerConfig {
  int micro_batch = 1;  // items per rank per step
  int rank = 0;
  int world_size = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
  bool pad_last_batch = false;  // evaluation: one pass over every item, the last batch padded
};

class EpochSampler {
 public:
  // Fails when the configuration is invalid or a single global batch does not fit (without
  // pad_last_batch) or there is no item at all.
  static Result<EpochSampler> create(std::uint64_t num_items, const SamplerConfig& config);

  // This rank's item indices for the current step (kPaddingItem past the last item with
  // pad_last_batch); then advances (rolling into the next epoch when this one is exhausted).
  void next(std::vector<std::uint64_t>* items);
  // Index, within the whole epoch, of this rank's first item of the current step. Loaders
  // address per-item random numbers by the item's own index (and the epoch), not by this
  // position, so that masks and augmentations depend on neither the world size nor the order.
  std::uint64_t global_position() const;
  std::uint64_t global_batch() const;  // G = micro_batch * world_size

  // Global batches in a whole epoch started at item 0 (a resumed epoch may have fewer left);
  // with pad_last_batch the last one may be partly padding.
  std::uint64_t steps_per_epoch() const { return steps_per_epoch_; }
  std::uint64_t num_items() const { return num_items_; }
  const SamplerConfig& config() const { return config_; }
  LoaderState state() const;
  Status restore(const LoaderState& state);

 private:
  EpochSampler() = default;
  void build_permutation();
  bool epoch_ends_at(std::uint64_t position) const;

  SamplerConfig config_;
  std::uint64_t num_items_ = 0;
  std::uint64_t steps_per_epoch_ = 0;
  std::uint64_t epoch_ = 0;
  std::uint64_t position_ = 0;  // items of the epoch consumed by all ranks together
  std::uint64_t perm_epoch_ = ~0ull;  // epoch that perm_ was built for
  std::vector<std::uint64_t> perm_;
};

// Stream ids for the loaders' per-item random numbers. Every rank must draw the same
// numbers, so the rank field of make_stream carries a sub-purpose instead of the rank.
enum class DataStream : std::uint32_t {
  kShuffle = 0,
  kMask = 1,
  kAugment = 2,
  kMarkov = 3,
  kSyntheticImages = 4,
  kMarkovModel = 5,
  kEvalMask = 6,  // evaluation's fixed MLM masks (mlm_loader.h)
};
std::uint64_t data_stream(DataStream purpose, std::uint64_t epoch);

}  // namespace sparq::data
