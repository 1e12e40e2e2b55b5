// The records that tell whether a checkpoint's flat state lands on the same positions in this
// run, and the refusals when it would not (Note [Layouts in the checkpoint], checkpointing.cpp):
// the parameter layout (any resume) and the bucket ranges (per-bucket exchange state; an
// elastic resume matches that state by these ranges, elastic_resume.h).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "comm/bucket_plan.h"
#include "core/param_store.h"
#include "core/status.h"
#include "train/checkpoint.h"

namespace sparq::train {

// A bucket plan as the flat {offset, count} of bucket b at index b. Checkpoints record the
// saving run's (metadata "buckets", one "offset count" line per bucket): their per-bucket
// compressor and aggregator state is saved by bucket index and belongs to these ranges.
using BucketRanges = std::vector<std::pair<std::size_t, std::size_t>>;
std::string format_bucket_ranges(const BucketRanges& ranges);
// The error names `file` and the bad line.
Result<BucketRanges> parse_bucket_ranges(const std::string& text, const std::string& file);
BucketRanges bucket_ranges(const comm::BucketPlan& plan);

// Each bucket's strategy as the checkpoint records it (metadata "aggregations", one name per
// bucket, comma-separated, "none" for a bucket sent dense: GradientExchange::
// aggregation_names()); empty for checkpoints written before it was recorded.
std::vector<std::string> saved_aggregations(const CheckpointFile& f);

// The settings that decide whether the optimizer state and the error-feedback residual exist
// (optim.momentum, compress.error_feedback, which buckets the plan compresses) may change on
// resume: `kept` sections ("residual", "optim/sgd.momentum") that the checkpoint lacks start
// from zeros, as in a fresh run; "residual" and "optim/*" sections it holds that are not kept
// are dropped. state_presence_warnings says which, naming the changed setting (rank 0 logs
// them).
struct StatePresence {
  std::vector<std::string> absent, dropped;
};
StatePresence state_presence(const CheckpointFile& f, const std::vector<std::string>& kept);
std::vector<std::string> state_presence_warnings(const StatePresence& presence,
                                                 const CheckpointFile& f,
                                                 const std::string& config);
// An absent residual is said apart (not by state_presence_warnings), once the resume knows
// whether a two_phase server residual was folded into it (Note [A server residual no server
// sends], compress/gradient_exchange.h): the warning said "starts from zeros" next to the line
// that folded mass into it (review, 2026-12-08). Both empty when the residual is not absent.
struct AbsentResidualLines {
  std::string zeros;   // a warning: what error feedback owed is gone
  std::string folded;  // information: the server's share of it is kept
};
AbsentResidualLines absent_residual_lines(const StatePresence& presence, const CheckpointFile& f,
                                          const std::string& config);

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
//   check_bucket_kinds: a bucket compressed there and sent dense here, or the other way round
//     (a same-world resume, which loads the exchange state bucket by bucket as it was saved;
//     comm.plan: auto decides it from comm.plan_profile, comm.plan_network and
//     comm.plan_min_compression). `here` is this run's aggregation_names(); checked only
//     when both plans have the same ranges (check_bucket_plan covers the others).
Status check_layout(const CheckpointFile& f, const std::string& layout, const std::string& config);

// The refusal of a resume into another model: the checkpoint's "model" spec and `here` (this
// run's ModelConfig::spec) are read back as models (parse_model_spec) and compared by the
// fields that decide the parameters or the function they hold (arch, sizes, nsp, layout, ...).
// They were compared as text, so the same model with its keys in another order, a default
// spelled out, or a changed dropout was refused (review, 2026-12-07). The settings left out
// (dropout, attn_dropout, init_std, fused_head, ln_eps, bn_eps, bn_momentum, the preset's
// name) may change on resume, as lr may; the resume's "other settings" line says so. A spec
// that does not read back is compared as text.
Status check_model(const CheckpointFile& f, const std::string& here);
Status check_bucket_plan(const CheckpointFile& f, const BucketRanges& here,
                         const std::string& config);
Status check_bucket_kinds(const CheckpointFile& f, const std::vector<std::string>& here,
                          const std::string& config);

}  // namespace sparq::train
