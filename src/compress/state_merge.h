// Elastic resume (train/elastic_resume.h, docs/reliability.md "Elastic resume"): how the
// per-rank state that the P ranks of an old world saved becomes the state of ONE rank of a
// new world of P' ranks. Every owner of per-rank state picks its rule through a merge hook
// (Compressor::state_merge, Aggregator::state_merge); the rules are:
//
//   mean         per-rank pending accumulations (error-feedback residuals, dgc's momentum,
//                momentum buffers): every new rank gets x' = fl(mean_p x_p), the sum taken in
//                double in rank order, divided by P in double, and rounded to f32 once. The
//                ranks' messages are averaged, so what such state still owes the run is the
//                AVERAGE over ranks; the new average (1/P') sum x' is x' itself, which equals
//                the old average up to that one rounding (bitwise when the old mean is an
//                f32, e.g. 2 -> 1 ranks with dyadic values).
//   replicated   identical on every rank (powersgd's allreduced factors): rank 0's; when the
//                ranks disagree the state is reset (with the warning), since nothing says
//                which rank is right.
//   repartition  state owned by region (two_phase's server residual): cut again by the new
//                regions, exact (two_phase_aggregator.h).
//   reset        no exact rule: the state starts empty, as in a fresh run, and the resume logs
//                one warning naming the state and why.
// Buckets are matched by flat position (MergeShape), so per-position state stays exact when
// the bucket plan itself changes with the world size.
// A merge is fed the old ranks' states one at a time, in rank order (the resume streams the
// old files and never holds two), and keeps only what its result needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sparq::compress {

// Where the merged state goes: the bucket at [offset, offset + size) of the flat parameter
// layout, from `old_world` ranks to rank `new_rank` of `new_world`. Buckets are matched by
// their flat ranges, not by index: the bucket plan may differ between world sizes (the tied
// embedding is isolated in its own bucket on some, train/train_config.h resolve_tied_split).
struct MergeShape {
  std::size_t offset = 0;
  std::size_t size = 0;
  int old_world = 1;
  int new_world = 1;
  int new_rank = 0;
};

struct MergedState {
  std::vector<std::uint8_t> bytes;  // what load_state() takes (empty: start empty)
  std::string rule;                 // for the resume log: "mean of 2", "rank 0's", ...
  std::string reset_reason;         // non-empty when the state was reset: why
  bool stateless() const { return rule.empty(); }  // nothing was saved by any rank
};

class StateMerge;
// One entry of a state's merges: `name` as in save_state() ("bucket<b>.<part>"), `part`
// ("compressor" or "aggregator": only old states of the same part are fed), `label` for the
// resume log.
struct NamedStateMerge {
  std::string name;
  std::string part;
  std::string label;
  MergeShape shape;
  std::unique_ptr<StateMerge> merge;
};

class StateMerge {
 public:
  virtual ~StateMerge() = default;
  // Called with every old bucket [old_offset, old_offset + old_size) that overlaps this one,
  // for each old rank in rank order 0 .. old_world - 1, with what that rank saved for it.
  virtual Status add(int old_rank, std::size_t old_offset, std::size_t old_size,
                     std::span<const std::uint8_t> state) = 0;
  virtual Result<MergedState> finish() = 0;
};

// The mean rule for f32 arrays, accumulated in double: the residual, optimizer and model
// sections use it directly. An empty array counts as zeros (state a rank never allocated).
class MeanAccumulator {
 public:
  // `what` names the state in size errors.
  Status add(std::span<const float> values, std::string_view what);
  int count() const { return count_; }
  std::size_t size() const { return sum_.size(); }
  // out[i] = float(sum_i / count); out.size() must be size(), or anything when size() is 0
  // (every array was empty: zeros).
  void finish(std::span<float> out) const;
  // out[i] = float(sum_i / count + plus[i]), rounded once: the mean with mass that belongs to
  // the average itself added (a two_phase server residual folded into the worker residuals,
  // train/elastic_resume.h). plus.size() == out.size().
  void finish(std::span<float> out, std::span<const double> plus) const;

 private:
  std::vector<double> sum_;
  int count_ = 0;
};

// Per-bucket-position f32 state (byte_io.h's save_floats form, one float per position of the
// old bucket, or empty: zeros): the mean over the old ranks, position by position in the flat
// layout, whatever the old buckets were. `what` names the state in errors.
std::unique_ptr<StateMerge> mean_floats_merge(std::string what, const MergeShape& shape);
// Rank 0's bytes when the old bucket is this very bucket; reset when the ranks disagree or the
// bucket plan changed (the state then belongs to another bucket's layout).
std::unique_ptr<StateMerge> replicated_merge(const MergeShape& shape);
// Keeps nothing; reports a reset with `reason` unless every rank saved an empty state.
std::unique_ptr<StateMerge> reset_merge(std::string reason);

}  // namespace sparq::compress
