// Elastic resume: loading a checkpoint that P ranks wrote into a job of P' != P ranks
// (docs/reliability.md, "Elastic resume", states the rules and why they are exact).
//
// Every rank of the new job reads the P old files one at a time (never two in memory) and
// builds its own state:
//   replicated sections (parameters; optimizer state when optim.communicate = gradient):
//     rank 0's; every other old file must hold the same bytes (compared by checksum), else the
//     resume is refused naming the section and the rank.
//   mean sections (the error-feedback residual; per-rank optimizer state in the momentum and
//     update modes; model state such as BatchNorm running statistics, which each rank
//     accumulates from its own micro-batches): x' = fl(mean_p x_p) (compress/state_merge.h),
//     which keeps the average over ranks, the pending mass of the residual, up to one
//     rounding.
//   compressor and aggregator state: the owner's merge hook (Compressor::state_merge,
//     Aggregator::state_merge): dgc's momentum by the mean, powersgd's factors replicated,
//     two_phase's server residual re-partitioned by region, anything else reset with ONE
//     warning (rank 0) naming it and why.
// What is not per-rank (step, optimizer step count, loader position, counters) comes from rank
// 0's metadata, read by the caller (checkpointing.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "comm/bucket_plan.h"
#include "compress/gradient_exchange.h"
#include "core/param_store.h"
#include "core/status.h"
#include "core/tensor.h"
#include "train/checkpoint.h"
#include "train/checkpoint_layout.h"

namespace sparq::train {

enum class MergeRule { kReplicated, kMean };

struct ElasticSection {
  std::string section;  // the checkpoint section: "params", "optim/adamw.exp_avg", ...
  Tensor tensor;        // where its merged floats go (f32, host or device)
  MergeRule rule;
  std::string label;  // groups sections in the resume log: "parameters", "residual mass"
};

struct ElasticResumeInput {
  std::string dir;    // the complete step directory
  int old_world = 1;  // ranks that wrote it
  int rank = 0;       // this process in the new world
  int world = 1;
  std::vector<ElasticSection> sections;
  compress::GradientExchange* exchange = nullptr;  // its save_state() entries are merged
  // The old world's bucket plan: flat {offset, count} of bucket b at index b. The old files
  // record it (metadata "buckets", BucketRanges above) and that record is used; checkpoints
  // written before it existed use this, rebuilt by the caller from this config for the old
  // world size, since the plan may depend on it (the tied embedding).
  BucketRanges old_buckets;
};

// Fills every section's tensor and the exchange's state. Returns the summary that rank 0 logs
// ("residual mass kept (mean of 2), two_phase aggregator state re-partitioned, ..."); logs
// the reset warnings itself (rank 0, one per distinct state and reason).
Result<std::string> merge_elastic_checkpoint(const ElasticResumeInput& in);

}  // namespace sparq::train
