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
//     warning (rank 0) naming it and why. Aggregator state goes only to a bucket that this
//     world aggregates by the strategy that saved it (metadata "aggregations").
//   Note [Mass the new plan does not carry]: the new world's plan (comm.plan: auto decides
//     per world size) may send a bucket dense that the old one compressed, or aggregate it by
//     another strategy. two_phase's server residual s is mass the region owner still owes the
//     AVERAGED gradient, as (1/P) sum_p e_p is for the worker residuals; where no two_phase
//     takes it here, it is folded into every new rank's residual, e' = fl(mean_p e_p + s),
//     which keeps the pending average (1/P') sum e' = mean + s up to that one rounding. A
//     dense bucket reads no residual: its pending mass would never be applied, be saved again
//     forever and come back stale at a later resume, so it is zeroed, and rank 0 warns naming
//     the bucket and the mass dropped (drop_stranded_residual).
// What is not per-rank (step, optimizer step count, loader position, counters) comes from rank
// 0's metadata, read by the caller (checkpointing.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
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
  // The section may be absent from every old file (a setting that decides whether the state
  // exists changed: compress.error_feedback, optim.momentum): it starts from zeros then, and
  // the caller says so. A file that has it where rank 0's has not (or the other way round) is
  // still refused for a replicated section.
  bool may_be_missing = false;
};

struct ElasticResumeInput {
  std::string dir;    // the complete step directory
  int old_world = 1;  // ranks that wrote it
  int rank = 0;       // this process in the new world
  int world = 1;
  std::vector<ElasticSection> sections;
  compress::GradientExchange* exchange = nullptr;  // its save_state() entries are merged
  // The old world's bucket plan for checkpoints written before it was recorded (metadata
  // "buckets", BucketRanges above, which is used when present): rebuilt from this config for
  // the old world size, since the plan may depend on it (the tied embedding). Called only for
  // such files: rebuilding may fail where the record is all that is needed
  // (comm.split_tied_embedding: always has no meaning on the one rank of an old world of 1).
  std::function<Result<BucketRanges>()> rebuild_old_buckets;
  // This world's buckets and how each travels (GradientExchange::aggregation_names(): the
  // strategy, "none" for a bucket sent dense), and the section that holds the flat
  // error-feedback residual (a kMean section; empty when this run keeps none). Note [Mass the
  // new plan does not carry].
  BucketRanges new_buckets;
  std::vector<std::string> new_aggregations;
  std::string residual_section = "residual";
  // Where rank 0's warnings (state dropped or reset) go, to be logged once every rank agreed
  // to resume (Trainer::resume); null logs them at once.
  std::vector<std::string>* warnings = nullptr;
  // Set to whether a two_phase server residual was folded into residual_section (may be null).
  bool* server_residual_folded = nullptr;
};

// Fills every section's tensor and the exchange's state. Returns the summary that rank 0 logs
// ("residual mass kept (mean of 2), two_phase aggregator state re-partitioned, ..."); rank 0's
// reset and drop warnings (one per distinct state and reason) go to `in.warnings`.
Result<std::string> merge_elastic_checkpoint(const ElasticResumeInput& in);

// Zeroes `residual` (the store's flat layout) in every bucket that `aggregations` sends dense
// ("none"): Note [Mass the new plan does not carry]. Returns the warning that names those
// buckets that held mass and the mass dropped (sum |e|, and its share of the residual's), or
// "" when none did. Any resume applies it, the same-world one too (a checkpoint that an
// earlier elastic resume wrote with such mass).
std::string drop_stranded_residual(std::span<float> residual, const BucketRanges& buckets,
                                   const std::vector<std::string>& aggregations);

}  // namespace sparq::train
