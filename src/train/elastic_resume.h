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
// Also here: the layout and bucket-range records that any resume checks first (below).
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

namespace sparq::train {

enum class MergeRule { kReplicated, kMean };

// A bucket plan as the flat {offset, count} of bucket b at index b. Checkpoints record the
// saving run's (metadata "buckets", one "offset count" line per bucket): their per-bucket
// compressor and aggregator state is saved by bucket index and belongs to these ranges.
using BucketRanges = std::vector<std::pair<std::size_t, std::size_t>>;
std::string format_bucket_ranges(const BucketRanges& ranges);
// The error names `file` and the bad line.
Result<BucketRanges> parse_bucket_ranges(const std::string& text, const std::string& file);
BucketRanges bucket_ranges(const comm::BucketPlan& plan);

// What a checkpoint's flat sections (params, optim/*, residual) belong to: the store's layout
// as its metadata "layout" records it, one "name offset numel" line per tensor in
// declaration order (Note [Layouts in the checkpoint], checkpointing.cpp).
std::string layout_text(const ParamStore& store);

// The refusals of a resume whose state would land on other positions; `config` is this run's
// resolved config, whose settings that differ from the checkpoint's the errors name.
// Checkpoints without the metadata (written before it existed) pass, as before.
//   check_layout: another "layout" (any resume; the model, comm.dense_patterns and
//     comm.min_compress_numel decide it).
//   check_bucket_plan: other "buckets" while some "exchange/" section holds state (a
//     same-world resume, which loads that state by bucket index; comm.bucket_mb and the
//     other plan settings decide the ranges).
Status check_layout(const CheckpointFile& f, const std::string& layout, const std::string& config);
Status check_bucket_plan(const CheckpointFile& f, const BucketRanges& here,
                         const std::string& config);

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
