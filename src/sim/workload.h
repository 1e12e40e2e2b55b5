// The workload of the step simulator: what one worker computes and sends in a step, built
// from a TrainConfig and a MachineProfile (docs/simulate.md, "The workload").
//
//   ModelLayout   the real parameter layout and bucket plan: make_model + declare, ParamStore
//                 laid out with the plan's is_dense placement (ParamStore::lay_out: offsets
//                 and sizes only, no parameter or gradient buffers, so a model larger than the
//                 host's memory is priced too; simulate for gpt2-124M peaks at about 8 MB
//                 resident), BucketPlan::build with the config's comm keys, and for a model
//                 with a tied embedding a second plan with the table isolated.
//   tied split    when resolve_tied_split() says the training would split the tied embedding
//                 at this world size (Note [Tied embedding split], models/model.h): the
//                 isolated table's buckets are ready with the last layer's interval (which
//                 holds the head's backward), and one tail job after backward exchanges the
//                 lookup's rows, micro_batch * seq_len of them per rank (an upper bound: the
//                 distinct tokens of the batch).
//   compute       per-layer backward intervals, forward and optimizer time: from
//                 profile.compute.measured when its model spec describes the same model
//                 (scaled linearly by micro_batch * seq_len tokens), else from
//                 profile.compute.flops (transformers only):
//                   linear layers       forward 2 * params * tokens FLOPs, backward twice that
//                   attention layers    + scores and mixing 4 T^2 C B forward, twice backward
//                   vocabulary head     2 * padded_vocab * C * tokens forward, twice backward,
//                                       in the interval of ModelLayout::head_layer: GPT-2's LM
//                                       head and BERT's MLM decoder, both tied to the word
//                                       embedding and over every token
//                   embeddings, norms   memory traffic: 8 * tokens * C bytes forward (read and
//                                       write one f32 activation), twice backward
//                 at matmul_tflops and memory_gbps; optimizer_ns_per_param * params.
//   messages      per bucket for the config's compressor: Compressor::fixed_message_bytes of
//                 the real compressor (make_compressor) when it has one, else the formulas
//                 of docs/compress.md with the index section I estimated from gaps of n/k:
//                   topk, topk_sampled, dgc, gtopk   12 + I + 4k
//                   lbs                              12 + I + 2 ceil(k/B) + ceil(k b / 8)
//                   I = min(ceil(n/8), k * leb128_bytes(max(floor(n/k), 1) - 1))
//                   k = clamp(round(rho n), 1, n)
//                 low_rank (powersgd): the real compressor's set_layout over the bucket's
//                 matrices (whole rows of every 2-D tensor inside it), allreduced as P factors
//                 + dense floats and Q factors (4 (sum (rows + cols) r + dense) bytes per step).
//                 The sparse formula applies to compressors that declare sparse_f32; lbs's is
//                 its own. A configured aggregation the compressor refuses is an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/bucket_plan.h"
#include "core/param_store.h"
#include "models/model.h"
#include "sim/profile.h"
#include "sim/step_model.h"
#include "train/train_config.h"

namespace sparq::sim {

// A cell: a compress section, applied to the config as --set overrides.
struct Cell {
  std::string name;
  std::vector<std::string> overrides;
  std::string summary;
};
const std::vector<Cell>& cells();
Result<Cell> find_cell(const std::string& name);

struct ModelLayout {
  ModelConfig model;
  std::vector<LayerParams> layers;
  // The table the trainer may split (Model::tied_embedding(): GPT-2's wte; BERT's decoder is
  // tied too, but its table is not split), and its shape (0 without one).
  std::string tied_embedding;
  std::int64_t tied_rows = 0, tied_dim = 0;
  // The layer whose backward interval holds the vocabulary head's backward (the layer reported
  // right after it: GPT-2's ln_f, BERT's mlm.decoder), -1 for a model without one (VGG). Not
  // tied_embedding, which only GPT-2 names: BERT's head was left out of the FLOP model.
  int head_layer = -1;
  // Model::weighs_counted_targets() (BERT): a step starts with the allreduce of its counted
  // targets (Note [Per-step control], sim/step_model.h).
  bool weighs_counted_targets = false;
  ParamStore store;
  std::unique_ptr<comm::BucketPlan> plan;
  std::unique_ptr<comm::BucketPlan> split_plan;  // the tied table isolated; null without one
};
Result<std::unique_ptr<ModelLayout>> build_layout(const train::TrainConfig& config);
// Whether training `config` on `world_size` ranks splits the tied embedding.
Result<bool> uses_tied_split(const ModelLayout& layout, const train::TrainConfig& config,
                             int world_size);

struct ComputeTimes {
  double forward_s = 0;
  std::vector<double> backward_s;  // layers() order
  double optimizer_s = 0;
  std::string source;  // "measured" or "flops"
};
Result<ComputeTimes> compute_times(const ModelLayout& layout, const MachineProfile& profile,
                                   std::int64_t micro_batch, std::int64_t seq_len);

// The step of `layout` as the train app runs it, for simulate_step: `compute`, `buckets`, and
// the per-step control allreduces (Note [Per-step control], sim/step_model.h): the stop poll
// (train always polls) and, for a model that weighs counted targets, the target count.
StepInput train_step_input(const ModelLayout& layout, const ComputeTimes& compute,
                           std::vector<SimBucket> buckets);

// LEB128 bytes of v.
int leb128_bytes(std::uint64_t v);
// Estimated index section of a sparse message: k kept of n, gaps of n/k, each written as
// gap - 1 (compress/sparse_format.cpp).
double sparse_index_bytes(std::int64_t n, std::int64_t k);
std::int64_t kept_entries(double density, std::int64_t n);

// The buckets of `layout` under config.compress (the cell's compressor, its aggregation and
// its codec rates from the profile); `tied_split`: the split plan and the rows' tail job.
Result<std::vector<SimBucket>> simulate_buckets(const ModelLayout& layout,
                                                const train::TrainConfig& config,
                                                const MachineProfile& profile,
                                                bool tied_split = false);

}  // namespace sparq::sim
