// Trainer::load_elastic: a checkpoint written by another world size, merged section by section
// (train/elastic_resume.h has the merge rules; train/checkpointing.cpp the same-world resume
// and the metadata checks both paths share).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "train/checkpoint_layout.h"
#include "train/elastic_resume.h"
#include "train/trainer.h"

namespace sparq::train {

// Which rule each float section follows on another world size (elastic_resume.h): the
// parameters are replicated; the optimizer state too when gradients travel, else it is per
// rank (momentum, update modes) and merged by the mean, like the residual and the model
// state (BatchNorm statistics, accumulated by each rank from its own micro-batches).
Result<std::string> Trainer::load_elastic(const std::string& dir, int old_world,
                                          std::vector<std::string>& warnings,
                                          bool& server_residual_folded) {
  ElasticResumeInput in;
  in.server_residual_folded = &server_residual_folded;
  // Logged by resume() once every rank agreed (they were logged before a refusal: review,
  // 2026-12-06).
  in.warnings = &warnings;
  in.dir = dir;
  in.old_world = old_world;
  in.rank = comm_.rank();
  in.world = comm_.size();
  in.exchange = exchange_.get();
  // The old world's bucket plan for checkpoints that do not record theirs (Note [Layouts in
  // the checkpoint]), rebuilt from this config: whether the tied embedding gets a bucket of its
  // own depends on the world size. Other comm.* bucket settings than the old run's are then
  // caught by the merges' size checks. Only such files call it (a 1 -> P' resume under
  // comm.split_tied_embedding: always failed here on a file that records its plan), and an old
  // world of one rank is unsplit: resolve_tied_split refuses `always` there, where the split
  // means nothing.
  in.rebuild_old_buckets = [this, old_world]() -> Result<BucketRanges> {
    const std::int64_t tied_rows =
        model_->tied_embedding().empty() ? 0 : store_.entry(model_->tied_embedding()).spec.shape[0];
    bool old_split = false;
    if (old_world > 1) {
      SPARQ_ASSIGN_OR_RETURN(old_split, resolve_tied_split(config_, tied_rows, old_world));
    }
    comm::BucketPlanConfig old_plan_config = config_.comm.plan;
    if (old_split) old_plan_config.isolated = {model_->tied_embedding()};
    auto old_plan = comm::BucketPlan::build(store_, model_->layers(), old_plan_config);
    if (!old_plan.is_ok()) return old_plan.status().with_context("the old world's bucket plan");
    return bucket_ranges(*old_plan);
  };
  in.new_buckets = bucket_ranges(*plan_);
  in.new_aggregations = exchange_->aggregation_names();
  in.sections.push_back({"params", store_.param_range({0, store_.flat_numel()}),
                         MergeRule::kReplicated, "parameters"});
  for (const StateTensor& s : model_->state()) {
    in.sections.push_back({"model/" + s.name, s.tensor, MergeRule::kMean, "model state"});
  }
  // The optimizer state and the residual exist or not by settings that may change on resume
  // (optim.momentum, compress.error_feedback, the plan): absent, they start from zeros, and
  // load_checkpoint says so.
  // Which optimizer buffers are replicated is the optimizer's to say (Adam keeps its variance
  // replicated in the momentum mode: checked equal, as the parameters, where it was once
  // averaged without a check; review, 2026-12-07). Where any is per rank, one warning says
  // what the merge means for each.
  std::vector<std::string> how_merged;
  bool any_per_rank = false;
  for (const StateTensor& s : optimizer_->state()) {
    const optim::Optimizer::StateAcrossRanks across = optimizer_->state_across_ranks(s.name);
    any_per_rank = any_per_rank || !across.replicated;
    how_merged.push_back(fmt::format("{}: {}", s.name,
                                     across.replicated ? "the same on every rank, kept"
                                     : across.mean_is_exact
                                         ? "exact, linear in the gradients"
                                         : "an estimate, not linear in the gradients"));
    in.sections.push_back({"optim/" + s.name, s.tensor,
                           across.replicated ? MergeRule::kReplicated : MergeRule::kMean,
                           across.label, /*may_be_missing=*/true});
  }
  const std::span<float> residual = exchange_->residual();
  if (!residual.empty()) {
    in.sections.push_back(
        {"residual",
         Tensor(residual.data(), DType::kF32, {static_cast<std::int64_t>(residual.size())}),
         MergeRule::kMean, "residual mass", /*may_be_missing=*/true});
  } else {
    in.residual_section.clear();
  }
  if (any_per_rank && is_root()) {
    // A non-linear state's mean is only an estimate, but zeroing it (Adam's second moment in
    // the update mode) would make the next steps huge.
    warnings.push_back(fmt::format(
        "elastic resume: optim.communicate is {}: the optimizer state per rank becomes the "
        "mean of the {} old ranks' ({})",
        config_.optim.communicate, old_world, fmt::join(how_merged, "; ")));
  }
  return merge_elastic_checkpoint(in);
}

}  // namespace sparq::train
