// comm.plan: auto (docs/simulate.md, "The automatic plan"): at start-up, the step model of
// this file's siblings, fed with a measured machine profile, chooses for every compressed
// bucket of the plan whether to send it dense or compressed and by which aggregation strategy,
// minimising the predicted step time (so its exposed communication), subject to a minimum
// compression ratio of the whole step's messages.
//
// Search: start from the fixed plan (every compressed bucket by the configured strategy:
// compress.aggregation, or the compressor's own when that is auto); then, bucket by bucket in
// launch order, try every option the compressor accepts (dense, allreduce, allgather, two_phase,
// tree: compress/aggregation.h decides) and keep the one with the shortest predicted step whose
// step bytes still meet the ratio; two passes. A bucket's best option depends on its neighbours
// only through the comm thread's queue, which the second pass sees. Deterministic: the same config,
// profile and world size give the same choice on every rank (the trainer checks that they agree).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compress/compressor.h"
#include "sim/profile.h"
#include "sim/workload.h"
#include "train/train_config.h"

namespace sparq::sim {

// How choose_auto_plan prices a step. The defaults are the trainer's at start-up: compute from
// the profile, comm.allreduce as the backend runs it, MPI's choice for gathers, communication
// at full rate under backward. simulate passes its own command line's, so that its "+auto"
// rows are priced as its fixed rows are.
struct AutoPlanPricing {
  std::optional<ComputeTimes> compute;  // else compute_times() from the profile
  std::string allreduce;                // else config_allreduce_algorithm(comm.allreduce)
  std::string gather = "best";
  double busy_comm_rate = 1.0;
};

struct AutoPlan {
  // One entry per plan bucket, the GradientExchangeConfig::bucket_choice form: "" for dense
  // buckets of the plan, else "dense" or the chosen strategy.
  std::vector<std::string> bucket_choice;
  double predicted_step_ms = 0;  // with the choice
  double fixed_step_ms = 0;      // the fixed plan (every bucket by the configured strategy)
  double predicted_exposed_ms = 0, fixed_exposed_ms = 0;
  StepResult predicted;  // the chosen plan's step, its buckets' timings and bytes included
  // Dense f32 bytes / rank 0's message bytes over the step's buckets, with the choice: the
  // trainer's compression ratio (train/metrics.h). two_phase and tree payloads depend on the
  // world size (each region's message and the region result; the root's agreed values).
  double compression_ratio = 1;
  bool tied_split = false;
  // "bucket 3 (0.50 MiB): two_phase, predicted step 812.4 ms (allgather 840.1, dense 1203.0)"
  std::vector<std::string> reasons;
};

// Rank 0's message bytes for bucket `b` on `world_size` ranks: the payload its aggregator
// counts (Aggregator::payload_bytes()), so that the plan's ratio is the one the trainer
// reports (dense f32 bytes / payload bytes, train/metrics.h, printed by rank 0).
double plan_payload_bytes(const SimBucket& b, int world_size);

// The strategies a compressed bucket may take, each once: the configured one first (the fixed
// plan's), then every other built-in strategy whose accepts() and check_compressor() take
// `compressor` with the config's aggregator options.
std::vector<std::string> plan_strategies(const train::TrainConfig& config,
                                         const compress::Compressor& compressor);

// The choice for training `config` on `world_size` ranks over `link`. `layout` is
// build_layout(config); min_compression >= 1. Errors: a profile without the compressor's
// codec rates, a config whose compressor is none.
Result<AutoPlan> choose_auto_plan(const ModelLayout& layout, const train::TrainConfig& config,
                                  const MachineProfile& profile, const NetworkLink& link,
                                  int world_size, double min_compression,
                                  const AutoPlanPricing& pricing = {});

}  // namespace sparq::sim
