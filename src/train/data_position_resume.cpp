// Where a resumed run's data continues (Trainer::restore_data_position, called by
// load_checkpoint): the loader's saved epoch and position, checked against this run's seed,
// data and row length. The same data continues bit-identically; other data (another corpus,
// or rows of another data.seq_len) continues with a warning; a position past the end of the
// same data, or another seed, is refused (docs/reliability.md, "Data position").
#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {

Status Trainer::restore_data_position(const CheckpointFile& f, const std::string& file,
                                      bool elastic, std::int64_t world,
                                      std::vector<std::string>& warnings) {
  data::LoaderState loader;
  SPARQ_ASSIGN_OR_RETURN(std::int64_t seed, f.meta_int("loader.seed"));
  SPARQ_ASSIGN_OR_RETURN(std::int64_t epoch, f.meta_int("loader.epoch"));
  SPARQ_ASSIGN_OR_RETURN(std::int64_t loader_step, f.meta_int("loader.step"));
  loader.seed = static_cast<std::uint64_t>(seed);
  loader.epoch = static_cast<std::uint64_t>(epoch);
  loader.step = static_cast<std::uint64_t>(loader_step);
  // The seed orders every epoch's items: the saved position counts items of that order. The
  // loader refused another one in its own words, naming no setting (review, 2026-12-07).
  if (loader.seed != config_.train.seed) {
    return Status::error(
        "{}: the checkpoint's run has train.seed {}, this one {}: the seed fixes the order "
        "the data is read in, and the saved position counts items of that order; resume "
        "with --set train.seed={}",
        file, loader.seed, config_.train.seed, loader.seed);
  }
  // The global number of items consumed in the epoch: written since elastic resume exists;
  // before, step counted global batches of the writing run (G = its micro_batch x its world).
  // Its micro-batch is its resolved config's: this run's, which may differ, put the data
  // elsewhere (review, 2026-12-07: 2 ranks x 4 items x 5 steps resumed at item 80 with
  // micro_batch 8). Only a checkpoint without that config takes this run's.
  if (f.meta.count("loader.position")) {
    SPARQ_ASSIGN_OR_RETURN(std::int64_t position, f.meta_int("loader.position"));
    loader.position = static_cast<std::uint64_t>(position);
  } else {
    std::uint64_t micro_batch = static_cast<std::uint64_t>(config_.train.micro_batch);
    if (const auto saved = config_setting(f.meta_or("config", ""), "train.micro_batch")) {
      std::uint64_t parsed = 0;
      const auto [end, error] =
          std::from_chars(saved->data(), saved->data() + saved->size(), parsed);
      if (error != std::errc() || end != saved->data() + saved->size() || parsed == 0) {
        return Status::error("{}: the checkpoint's config has train.micro_batch '{}'", file,
                             *saved);
      }
      micro_batch = parsed;
    }
    std::uint64_t position = 0;
    if (__builtin_mul_overflow(loader.step, micro_batch, &position) ||
        __builtin_mul_overflow(position, static_cast<std::uint64_t>(world), &position)) {
      return Status::error("{}: loader.step {} is not a position (damaged checkpoint)", file,
                           loader.step);
    }
    loader.position = position;
  }
  // The data's identity, not its path (a checkpoint of before 2026-12-07 has only the
  // description, path included): the same shard named from another working directory was
  // called other data (review, 2026-12-07). A saved identity equal to today's description is
  // the same data too: a Markov checkpoint of before its identity held the token count.
  const bool identity_saved = f.meta.count("data.identity") != 0;
  const std::string saved_data = f.meta_or(identity_saved ? "data.identity" : "data", "");
  const std::string& data_now =
      identity_saved ? data_info_.same_data_key() : data_info_.description;
  const bool other_data = train_data_ != nullptr && !saved_data.empty() && saved_data != data_now &&
                          saved_data != data_info_.description;
  // A token item is a row of data.seq_len tokens: with another length, the same tokens are
  // other items, and the position was refused as "past the end" or continued in other rows
  // without a word (review, 2026-12-07). Checkpoints before it was saved do not say.
  const std::string saved_rows = f.meta_or("data.seq_len", "");
  const bool other_rows = train_data_ != nullptr && std::string_view(data_info_.unit) == "tok" &&
                          !saved_rows.empty() && saved_rows != std::to_string(config_.data.seq_len);
  // A dry run whose data files do not exist yet has no loader (Trainer::build): the
  // checkpoint is checked, the data position cannot be (it crashed here: review, 2026-12-05).
  std::string position_note = "continues in other items";
  if (train_data_ != nullptr) {
    Status restored = train_data_->restore(loader);
    if (!restored.is_ok() && (other_data || other_rows)) {
      // Other items, fewer than the saved position: that epoch ends there and the next starts
      // at item 0, as an elastic resume does when too few items are left (docs/reliability.md,
      // "Data position"). It was refused, where the documentation promised a warning (review,
      // 2026-12-07). The same data at a position past its end is a damaged or foreign
      // checkpoint, refused as before.
      data::LoaderState next = loader;
      next.epoch = loader.epoch + 1;
      next.step = 0;
      next.position = 0;
      restored = train_data_->restore(next);
      position_note = fmt::format(
          "is past the end of the new data's epoch, which ends there: "
          "epoch {} starts at item 0",
          next.epoch);
    }
    SPARQ_RETURN_IF_ERROR(restored.with_context(file));
  }
  if (other_data || other_rows) {
    // Allowed (fine-tuning goes on from another corpus or at another context length), but the
    // saved position counts items of the old data: said, where it used to continue silently
    // (review, 2026-12-05).
    std::string what;
    if (other_data) {
      what = fmt::format("the training data differs from the checkpoint's (was: {}; now: {})",
                         saved_data, data_now);
    }
    if (other_rows) {
      what += fmt::format(
          "{}data.seq_len is {} here, {} in the checkpoint: rows of another "
          "length are other items",
          what.empty() ? "" : "; ", config_.data.seq_len, saved_rows);
    }
    warnings.push_back(fmt::format("resume: {}: the data position (item {} of epoch {}) {}", what,
                                   loader.position.value_or(0), loader.epoch, position_note));
  }
  return Status::ok();
}

}  // namespace sparq::train
