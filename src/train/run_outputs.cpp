// What a run writes beside its steps: log.metrics and the checkpoint folder, opened (or set
// aside) before the first step, and log.trace after its steps (trainer.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "comm/gather.h"
#include "core/file_io.h"
#include "core/output_file.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

// The directory holding `dir` (a trailing '/' or a symbolic link resolved first); "" when
// `dir` does not exist.
std::string parent_directory(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(dir, ec);
  return ec ? std::string() : resolved.parent_path().string();
}

}  // namespace

bool Trainer::only_evaluates_a_saved_step() const {
  const std::string& root = config_.train.checkpoint_dir;
  return !root.empty() && start_step_ >= config_.train.steps && !resumed_from_.empty() &&
         (same_directory(checkpoint_dir(root, start_step_), resumed_from_) ||
          same_directory(parent_directory(resumed_from_), root));
}

Status Trainer::open_run_outputs(std::int64_t stop_at) {
  const TrainConfig& c = config_;
  // A fresh start in a used checkpoint_dir sets its steps aside before its first step, and
  // their records in log.metrics with them (they were truncated away; and set aside only at
  // the first save, a run that never saved left the steps in place but not their metrics:
  // reviews, 2026-12-06).
  // (Not when a save before run() set the steps aside already: the metrics go with them or
  // not at all.)
  if (!c.train.checkpoint_dir.empty() && step_ == 0 && resumed_from_.empty() &&
      !other_histories_checked_) {
    if (is_root() && !c.log.metrics_path.empty() && !metrics_.is_open()) {
      for (const std::string& m : set_aside_metrics(c.log.metrics_path, c.train.checkpoint_dir))
        spdlog::warn("log.metrics: {}", m);
    }
    SPARQ_RETURN_IF_ERROR(set_aside_other_histories());
  }
  // The checkpoint directory is made now, not at the first save: one that cannot be made
  // was found after the whole run, whose weights were then lost (review, 2026-12-05).
  Status made;
  if (is_root() && !c.train.checkpoint_dir.empty()) {
    made = create_directories_durably(c.train.checkpoint_dir).with_context("train.checkpoint_dir");
  }
  SPARQ_RETURN_IF_ERROR(agree(made, "making train.checkpoint_dir"));
  // One that exists but takes no files (permissions, a read-only mount) failed only at the
  // first save, after the whole run with the default interval, and the export with it
  // (review, 2026-12-07). Every rank that sees the folder checks (ranks on nodes without a
  // shared filesystem see none, and make their own at the save).
  // Not for a resume that only evaluates a step of this folder: it saves nothing there, and
  // a read-only folder of checkpoints is a fine thing to evaluate (refused: review).
  Status writable;
  if (!c.train.checkpoint_dir.empty() && !only_evaluates_a_saved_step()) {
    std::error_code ec;
    if (is_root() || std::filesystem::is_directory(c.train.checkpoint_dir, ec)) {
      writable = check_file_can_be_written(
          (std::filesystem::path(c.train.checkpoint_dir) / "step-00000000").string(),
          "train.checkpoint_dir: a step folder");
    }
  }
  SPARQ_RETURN_IF_ERROR(agree(writable, "checking train.checkpoint_dir"));
  // log.metrics is opened (and a fresh run's truncated) only once the checkpoint folder
  // passed: a run refused for its folder emptied the metrics of the run before it (review,
  // 2026-12-07).
  Status opened;
  if (is_root() && !c.log.metrics_path.empty() && !metrics_.is_open()) {
    // Only a resume that trains: one that only evaluates (or stops at once) writes no step
    // past this one, and left the file out of step with the checkpoints it keeps (self-review,
    // 2026-12-07).
    const bool trains = step_ < c.train.steps && (stop_at < 0 || stop_at > step_);
    if (step_ > 0 && trains) {
      for (const std::string& m : set_aside_records_past(c.log.metrics_path, step_))
        spdlog::info("log.metrics: {}", m);
    }
    opened = metrics_.open(c.log.metrics_path, /*append=*/step_ > 0);
  }
  SPARQ_RETURN_IF_ERROR(agree(opened, "opening log.metrics"));
  return Status::ok();
}

Status Trainer::write_trace() {
  // One file for all ranks, on a common time origin.
  std::string all;
  const Status s = engine_->run("trace gather", step_, [&](comm::Communicator& cm) {
    all = comm::gather_trace_events(cm, trace_);
    return Status::ok();
  });
  SPARQ_RETURN_IF_ERROR(s);
  trace_.clear();
  if (!is_root()) return Status::ok();
  // A diagnostic: its folder is made as log.metrics' is, and a failed write is a warning, not
  // the end of a run that may be hours from its last checkpoint.
  const std::filesystem::path path(config_.log.trace_path);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  // A link's file is replaced and a device written in place (core/output_file.h).
  const Status written = write_output_file(
      config_.log.trace_path, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[" + all + "]}\n");
  if (!written.is_ok()) {
    spdlog::warn("log.trace: {}; training goes on without the trace", written.message());
    return Status::ok();
  }
  // The steps this process recorded: a run resumed inside the window has only its own, and
  // one stopped inside it writes what it has (run()); the log claimed the whole window
  // (review, 2026-12-07).
  const std::int64_t window_first = config_.log.trace_start + 1;
  const std::int64_t window_last = config_.log.trace_start + config_.log.trace_steps;
  const std::int64_t first = std::max(window_first, start_step_ + 1);
  const std::int64_t last = std::min(window_last, step_);
  std::string missing;
  if (first > window_first) {
    missing += fmt::format("; steps {}..{} ran before the resume at step {} and are not in it",
                           window_first, first - 1, start_step_);
  }
  if (last < window_last) {
    missing += fmt::format("; the run ended before steps {}..{}", last + 1, window_last);
  }
  spdlog::info("wrote trace of steps {}..{} to {} (open in ui.perfetto.dev){}", first, last,
               config_.log.trace_path, missing);
  return Status::ok();
}

}  // namespace sparq::train
