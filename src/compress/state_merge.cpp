#include "compress/state_merge.h"

#include <algorithm>
#include <cstring>

#include "compress/aggregation.h"
#include "compress/byte_io.h"
#include "compress/compressor.h"

namespace sparq::compress {

Status MeanAccumulator::add(std::span<const float> values, std::string_view what) {
  ++count_;
  if (values.empty()) return Status::ok();  // zeros: adds nothing
  if (sum_.empty()) sum_.assign(values.size(), 0.0);
  if (sum_.size() != values.size()) {
    return Status::error("{}: rank {} saved {} floats, earlier ranks {}", what, count_ - 1,
                         values.size(), sum_.size());
  }
  for (std::size_t i = 0; i < values.size(); ++i) sum_[i] += values[i];
  return Status::ok();
}

void MeanAccumulator::finish(std::span<float> out) const {
  if (sum_.empty()) {  // every rank saved nothing: zeros
    std::fill(out.begin(), out.end(), 0.0f);
    return;
  }
  const double n = count_;
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(sum_[i] / n);
}

void MeanAccumulator::finish(std::span<float> out, std::span<const double> plus) const {
  const double n = count_;
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>((sum_.empty() ? 0.0 : sum_[i] / n) + plus[i]);
  }
}

namespace {

// Byte states as f32 arrays, one per old bucket position: summed in double into this
// bucket's positions, in rank order (files are fed in rank order), divided by the old world.
class MeanFloatsMerge final : public StateMerge {
 public:
  MeanFloatsMerge(std::string what, const MergeShape& shape)
      : what_(std::move(what)), shape_(shape) {}
  Status add(int old_rank, std::size_t old_offset, std::size_t old_size,
             std::span<const std::uint8_t> state) override {
    SPARQ_RETURN_IF_ERROR(load_floats(state, scratch_, what_));
    if (scratch_.empty()) return Status::ok();  // zeros
    if (scratch_.size() != old_size) {
      return Status::error("{} of old rank {}: {} floats for a bucket of {}", what_, old_rank,
                           scratch_.size(), old_size);
    }
    if (sum_.empty()) sum_.assign(shape_.size, 0.0);
    const std::size_t begin = std::max(old_offset, shape_.offset);
    const std::size_t end = std::min(old_offset + old_size, shape_.offset + shape_.size);
    for (std::size_t x = begin; x < end; ++x) sum_[x - shape_.offset] += scratch_[x - old_offset];
    return Status::ok();
  }
  Result<MergedState> finish() override {
    MergedState out;
    if (sum_.empty()) return out;  // nothing saved anywhere
    scratch_.resize(sum_.size());
    for (std::size_t i = 0; i < sum_.size(); ++i) {
      scratch_[i] = static_cast<float>(sum_[i] / static_cast<double>(shape_.old_world));
    }
    save_floats(scratch_, out.bytes);
    out.rule = "mean of " + std::to_string(shape_.old_world);
    return out;
  }

 private:
  std::string what_;
  MergeShape shape_;
  std::vector<double> sum_;
  std::vector<float> scratch_;
};

class ReplicatedMerge final : public StateMerge {
 public:
  explicit ReplicatedMerge(const MergeShape& shape) : shape_(shape) {}
  Status add(int old_rank, std::size_t old_offset, std::size_t old_size,
             std::span<const std::uint8_t> state) override {
    any_ = any_ || !state.empty();
    if (old_offset != shape_.offset || old_size != shape_.size) {
      other_bucket_ = true;
    } else if (old_rank == 0) {
      first_.assign(state.begin(), state.end());
    } else if (state.size() != first_.size() ||
               (!state.empty() && std::memcmp(state.data(), first_.data(), state.size()) != 0)) {
      disagreeing_ = old_rank;
    }
    return Status::ok();
  }
  Result<MergedState> finish() override {
    MergedState out;
    if (!any_) return out;
    if (other_bucket_ || disagreeing_ >= 0) {
      out.rule = "reset";
      out.reset_reason = other_bucket_
                             ? "the bucket plan differs between the world sizes and the state "
                               "belongs to the old bucket's layout"
                             : "it should be identical on every rank but rank " +
                                   std::to_string(disagreeing_) + "'s differs from rank 0's";
      return out;
    }
    out.bytes = std::move(first_);
    out.rule = "rank 0's (replicated)";
    return out;
  }

 private:
  MergeShape shape_;
  std::vector<std::uint8_t> first_;
  bool any_ = false, other_bucket_ = false;
  int disagreeing_ = -1;
};

class ResetMerge final : public StateMerge {
 public:
  explicit ResetMerge(std::string reason) : reason_(std::move(reason)) {}
  Status add(int, std::size_t, std::size_t, std::span<const std::uint8_t> state) override {
    any_ = any_ || !state.empty();
    return Status::ok();
  }
  Result<MergedState> finish() override {
    MergedState out;
    if (!any_) return out;
    out.rule = "reset";
    out.reset_reason = reason_;
    return out;
  }

 private:
  std::string reason_;
  bool any_ = false;
};

}  // namespace

std::unique_ptr<StateMerge> mean_floats_merge(std::string what, const MergeShape& shape) {
  return std::make_unique<MeanFloatsMerge>(std::move(what), shape);
}
std::unique_ptr<StateMerge> replicated_merge(const MergeShape& shape) {
  return std::make_unique<ReplicatedMerge>(shape);
}
std::unique_ptr<StateMerge> reset_merge(std::string reason) {
  return std::make_unique<ResetMerge>(std::move(reason));
}

// The defaults: no exact rule is known for an owner that does not say otherwise.
std::unique_ptr<StateMerge> Compressor::state_merge(const MergeShape&) const {
  return reset_merge("the " + std::string(name()) + " compressor has no rule to merge its state");
}
std::unique_ptr<StateMerge> Aggregator::state_merge(const MergeShape&) const {
  return reset_merge(std::string(name()) + " aggregation has no rule to merge its state");
}

}  // namespace sparq::compress
