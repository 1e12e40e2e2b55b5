// The bucket plan: how the gradient buffer is cut into communication buckets, computed once
// from the ParamStore layout (see DESIGN.md, "Buckets and the WFBP scheduler").
//
// Walking from the LAST parameter (whose gradient backward produces first) towards the
// first: a first bucket of at most `first_bucket_mb`, then buckets of at most `bucket_mb`;
// a tensor is split only when it alone exceeds the cap. `bucket_mb: 0` cuts at every layer
// boundary instead (plain WFBP). Tensors that compress badly (below `min_compress_numel`
// elements or matching a `dense_patterns` glob such as "*.bias") go to dense buckets; the
// store must have been allocated with is_dense() as its place_last predicate, so that those
// tensors sit after all others and every bucket is one contiguous range.
//
// The caps count parameters, not the store's alignment padding (up to 63 floats after each
// tensor, param_store.h) that a bucket's range carries too: a bucket of many small tensors
// sends more than its cap (5000 one-float tensors under a cap of 2621 floats make a first
// bucket of 167,744 floats; review, 2026-12-06). Counting the padding would move the
// boundaries of every existing plan, which checkpoints with per-bucket state record, so the
// caps stay a count of parameters; the real models' tensors are large next to their padding.
//
// Bucket ranges tile [0, flat_numel) exactly, padding included, in layout order reversed:
// bucket 0 is the highest compressed range, and the dense buckets come last. Buckets launch in
// the order they become ready (Note [Readiness launch order], wfbp_scheduler.h), which is
// index order within each region when backward reports tensors in reverse layout order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/param_store.h"
#include "core/status.h"

namespace sparq::comm {

struct BucketPlanConfig {
  double first_bucket_mb = 1.0;
  double bucket_mb = 25.0;                  // 0: one bucket per layer
  std::int64_t min_compress_numel = 0;      // tensors with fewer elements are sent dense
  std::vector<std::string> dense_patterns;  // shell-style globs on parameter names
  // Tensors that share no bucket with any other tensor (still split by the caps): set by the
  // trainer for the split tied embedding, whose buckets are ready long before their
  // neighbours' (Note [Tied embedding split], models/model.h). Not a config key: the
  // trainer sets it, whatever a TrainConfig holds.
  std::vector<std::string> isolated;

  Status validate(const std::string& prefix = "comm.") const;
  // Every dense pattern matches some parameter of `store`: one that matches none is a typo
  // ("*.bais") that sent the tensors it meant through the compressor without a word
  // (review, 2026-12-07). The error names the pattern and a few parameter names.
  Status check_patterns_match(const ParamStore& store, const std::string& prefix = "comm.") const;
  // The routing rule; also the place_last predicate for ParamStore::allocate().
  bool is_dense(const ParamSpec& spec) const;
};

struct Bucket {
  int index = 0;
  ParamRange range;                  // contiguous, padding included
  std::int64_t ready_count = 0;      // tensor elements inside: ready when this many are reported
  std::vector<std::string> tensors;  // in backward order; a split tensor appears in several
  bool dense = false;
};

class BucketPlan {
 public:
  static Result<BucketPlan> build(const ParamStore& store, const std::vector<LayerParams>& layers,
                                  const BucketPlanConfig& config);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  std::size_t size() const { return buckets_.size(); }

  // The buckets that a tensor range overlaps, with the number of its elements in each.
  std::vector<std::pair<int, std::int64_t>> overlaps(ParamRange range) const;

  // A table for the start-up log: index, kind, offset, MiB, tensor count, the compressor
  // (when `compressor` names it per bucket), first/last tensor.
  std::string describe(const std::function<std::string(int)>& compressor = {}) const;

 private:
  std::vector<Bucket> buckets_;
};

}  // namespace sparq::comm
