// Per-step and evaluation metrics: the progress line printed on rank 0 and the JSONL records
// written next to it (docs/config.md, "Metrics", lists every field).
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "train/data_parallel.h"

namespace sparq::train {

// A step as the progress line and the JSONL record show it: the stepper's own measurements
// (its StepResult, kept whole so every field is named once) and what only the trainer knows.
struct StepMetrics {
  StepResult result;  // this rank's step; result.step is the 0-based index of the step run
  std::int64_t total_steps = 0;
  double residual_norm = 0;  // this rank's error-feedback residual after the step
  // This rank's ||e|| / ||a|| over the compressed buckets and per compressed bucket (plan
  // order); nullopt / empty without compressed buckets or error feedback (null in JSON).
  std::optional<double> rel_compression_error;
  std::vector<double> bucket_rel_error;
  std::optional<double> never_sent_share;  // log.never_sent_window; nullopt: off or not yet
  double items_per_s = 0;    // global: all ranks
  const char* unit = "tok";
  std::uint64_t payload_bytes = 0, dense_bytes = 0;  // this rank's messages vs f32 gradient
  double eta_s = 0;
  std::int64_t step() const { return result.step + 1; }  // 1-based: steps completed
  double compression_ratio() const {
    return payload_bytes ? static_cast<double>(dense_bytes) / static_cast<double>(payload_bytes)
                         : 1.0;
  }
};

struct EvalMetrics {
  std::int64_t step = 0;
  // NaN when no target was scored (count 0: null in the JSONL) or no evaluation ran (the
  // TrainSummary of a run stopped before its final one).
  double loss = std::numeric_limits<double>::quiet_NaN();
  double perplexity = -1;  // language models
  double accuracy = -1;    // VGG top-1, BERT masked-token accuracy
  std::int64_t count = 0;  // targets or images evaluated (all ranks)
  // The true source's loss on the same targets (order-1 Markov source only; else -1): the
  // best any model can score on THIS sample, which differs from the entropy rate by sampling
  // noise (about 1% at 16k targets on configs/default.yaml).
  double source_loss = -1;
  // Wall time of the evaluation on rank 0, the collectives that sum it included (-1: not
  // measured). The final evaluation of a GPT-2 config took 8 s with no line until it ended and
  // no time in its record (review, 2026-12-08).
  double eval_ms = -1;
};

// "step   40/300 | loss 3.2141 | lr 6.00e-04 | 12.3k tok/s | comm 1.2 ms exposed | 35.1 KiB
//  sent (x 28.4, err 0.812) | eta 1m12s"   (", err": rel_compression_error, when known)
std::string format_progress(const StepMetrics& m);
std::string format_eval(const EvalMetrics& m);
std::string to_json(const StepMetrics& m);
std::string to_json(const EvalMetrics& m);
std::string format_bytes(double bytes);
std::string format_duration(double seconds);

// A resume at step S continues the history up to S: records of `metrics` past S are of steps
// this run redoes (a run killed after its last checkpoint) or of a history it branches away
// from (an earlier step resumed, the later checkpoints set aside). They were left in the file,
// after which study.py read the abandoned history's final evaluation as the run's (review,
// 2026-12-07). They are moved to "<metrics>.past-<S>" (".2", ... when taken) and the file
// keeps the records up to S. Nothing happens when no record is past S, or `metrics` is
// missing, standard output or not a regular file. Called by a resume that trains (one that
// only evaluates or stops at once writes nothing past S). Returns a message saying what was
// done, or why not (for the caller to log).
std::vector<std::string> set_aside_records_past(const std::string& metrics, std::int64_t step);

// Appends lines to a file, each with one write(2), so a crashed run keeps every finished step.
// A record that cannot be written (disk full, /dev/full, a vanished mount) is a warning the
// first time and is counted, never the end of the run: the metrics are a diagnostic, and the
// run may be hours from its last checkpoint (as log.trace's writes, trainer.cpp). The part
// of a record that did get written is cut off again, so that once the disk has room the
// next record starts a line of its own (it was glued to the fragment: review, 2026-12-06).
class JsonlWriter {
 public:
  JsonlWriter() = default;
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  // Creates parent directories. `append` keeps earlier records (resumed runs) and drops an
  // incomplete last line, the record an interrupted run was writing, so that the first new
  // record starts a line of its own and every line of the file is one JSON record.
  Status open(const std::string& path, bool append);
  void write(const std::string& line);
  // fdatasync of what was written (a checkpoint's save calls it before the step's COMPLETE);
  // nothing for standard output, a pipe or a device, and a failure is not an error (the
  // metrics are a diagnostic).
  void sync();
  bool is_open() const { return fd_ >= 0; }
  // Records that write() could not write since open().
  std::int64_t lost_records() const { return lost_records_; }

 private:
  int fd_ = -1;
  std::string path_;
  // A fragment could not be cut off (not a regular file): the next record starts with '\n'.
  bool fragment_left_ = false;
  std::int64_t lost_records_ = 0;
};

}  // namespace sparq::train
