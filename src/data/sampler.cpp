#include "data/sampler.h"

#include <numeric>

#include "core/check.h"
#include "core/rng.h"

namespace sparq::data {

std::uint64_t data_stream(DataStream purpose, std::uint64_t epoch) {
  return make_stream(RngPurpose::kData, static_cast<std::uint32_t>(purpose),
                     static_cast<std::uint32_t>(epoch));
}

Result<EpochSampler> EpochSampler::create(std::uint64_t num_items, const SamplerConfig& config) {
  if (config.micro_batch <= 0)
    return Status::error("micro_batch must be positive, got {}", config.micro_batch);
  if (config.world_size <= 0)
    return Status::error("world_size must be positive, got {}", config.world_size);
  if (config.rank < 0 || config.rank >= config.world_size) {
    return Status::error("rank {} is outside [0, {})", config.rank, config.world_size);
  }
  const std::uint64_t global = static_cast<std::uint64_t>(config.micro_batch) * config.world_size;
  if (num_items == 0) return Status::error("dataset has no items");
  if (num_items < global && !config.pad_last_batch) {
    return Status::error(
        "dataset has {} items, fewer than one global batch (micro_batch {} x "
        "{} ranks = {}): use a smaller micro-batch or fewer ranks",
        num_items, config.micro_batch, config.world_size, global);
  }
  EpochSampler s;
  s.config_ = config;
  s.num_items_ = num_items;
  s.steps_per_epoch_ =
      config.pad_last_batch ? (num_items + global - 1) / global : num_items / global;
  return s;
}

void EpochSampler::build_permutation() {
  perm_.resize(num_items_);
  std::iota(perm_.begin(), perm_.end(), 0);
  if (config_.shuffle) {
    Rng rng(config_.seed, data_stream(DataStream::kShuffle, epoch_));
    for (std::uint64_t i = num_items_ - 1; i > 0; --i) std::swap(perm_[i], perm_[rng.below(i + 1)]);
  }
  perm_epoch_ = epoch_;
}

std::uint64_t EpochSampler::global_batch() const {
  return static_cast<std::uint64_t>(config_.micro_batch) * config_.world_size;
}

std::uint64_t EpochSampler::global_position() const {
  return position_ + static_cast<std::uint64_t>(config_.rank) * config_.micro_batch;
}

LoaderState EpochSampler::state() const {
  return {config_.seed, epoch_, position_ / global_batch(), position_};
}

// Training: the epoch ends when the next global batch would not fit (its incomplete tail is
// dropped); for position = step * G this is exactly step == steps_per_epoch_. Evaluation
// (pad_last_batch): when every item has been given out.
bool EpochSampler::epoch_ends_at(std::uint64_t position) const {
  return config_.pad_last_batch ? position >= num_items_ : position + global_batch() > num_items_;
}

void EpochSampler::next(std::vector<std::uint64_t>* items) {
  if (perm_epoch_ != epoch_) build_permutation();
  const std::uint64_t first = global_position();
  items->resize(static_cast<std::size_t>(config_.micro_batch));
  for (std::size_t i = 0; i < items->size(); ++i) {
    (*items)[i] = first + i < num_items_ ? perm_[first + i] : kPaddingItem;
  }
  position_ += global_batch();
  if (epoch_ends_at(position_)) {
    position_ = 0;
    ++epoch_;
  }
}

Status EpochSampler::restore(const LoaderState& state) {
  if (state.seed != config_.seed) {
    return Status::error("loader state was saved with seed {}, but this loader uses seed {}",
                         state.seed, config_.seed);
  }
  if (!state.position) {
    // A state from before positions were saved: step counts this world's global batches.
    if (state.step >= steps_per_epoch_) {
      return Status::error(
          "loader state step {} is past the {} steps of an epoch (different data or batch "
          "size?)",
          state.step, steps_per_epoch_);
    }
    epoch_ = state.epoch;
    position_ = state.step * global_batch();
    return Status::ok();
  }
  if (*state.position > num_items_) {
    return Status::error("loader state position {} is past the {} items of an epoch (different "
                         "data?)",
                         *state.position, num_items_);
  }
  epoch_ = state.epoch;
  position_ = *state.position;
  // Another world size may not fit one more global batch here: the epoch ends, as next()
  // would have ended it.
  if (epoch_ends_at(position_)) {
    position_ = 0;
    ++epoch_;
  }
  return Status::ok();
}

}  // namespace sparq::data
