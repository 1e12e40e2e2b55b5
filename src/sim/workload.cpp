// The simulator's workload (workload.h): the real layout and bucket plan, and each bucket's
// messages for the cell's compressor (per-layer compute: compute_times.cpp).
#include "sim/workload.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ranges>

#include "compress/aggregation.h"
#include "compress/gradient_exchange.h"
#include "compress/powersgd.h"
#include "compress/registry.h"
#include "core/check.h"

namespace sparq::sim {

const std::vector<Cell>& cells() {
  static const std::vector<Cell> kCells = {
      // Each cell sets every key that decides its exchange, so that a config file's own
      // compress.aggregation or server_compression cannot leak into it (review, 2026-12-05).
      {"dense_f32",
       {"compress.name=none", "compress.aggregation=auto"},
       "every bucket allreduced as f32"},
      {"dense_bf16",
       {"compress.name=bf16", "compress.aggregation=auto"},
       "bf16 allreduce (2 bytes per float)"},
      {"powersgd",
       {"compress.name=powersgd", "compress.powersgd.rank=4", "compress.aggregation=auto"},
       "PowerSGD rank 4, two allreduces per bucket"},
      {"topk",
       {"compress.name=topk", "compress.topk.density=0.01", "compress.aggregation=auto"},
       "top-k 1%, f32 values, allgather"},
      {"lbs_allgather",
       {"compress.name=lbs", "compress.lbs.density=0.01", "compress.lbs.bits=4",
        "compress.aggregation=allgather"},
       "lbs 1% 4-bit, allgather"},
      {"lbs_two_phase",
       {"compress.name=lbs", "compress.lbs.density=0.01", "compress.lbs.bits=4",
        "compress.aggregation=two_phase", "compress.server_compression=true"},
       "lbs 1% 4-bit, two_phase (server re-compression)"},
      {"lbs_tree",
       {"compress.name=lbs", "compress.lbs.density=0.01", "compress.lbs.bits=4",
        "compress.aggregation=tree"},
       "lbs 1% 4-bit, tree (lists merged by encode)"},
      {"gtopk",
       {"compress.name=gtopk", "compress.gtopk.density=0.01", "compress.aggregation=auto"},
       "global top-k 1%, tree"},
  };
  return kCells;
}

Result<Cell> find_cell(const std::string& name) {
  std::string known;
  for (const Cell& c : cells()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  return Status::error("--cells: unknown cell '{}' (known: {})", name, known);
}

namespace {

// ModelLayout::head_layer: where each architecture reports the readiness that follows its
// head's backward (Gpt2::backward_layers: ln_f; Bert::backward_layers: the decoder's bias,
// which comes before pooler and nsp in forward order, so it is not the last layer with nsp).
Result<int> vocab_head_layer(const ModelConfig& mc, const std::vector<LayerParams>& layers) {
  switch (mc.arch) {
    case ModelArch::kGpt2:
      return static_cast<int>(layers.size()) - 1;
    case ModelArch::kBert:
      for (std::size_t i = 0; i < layers.size(); ++i)
        if (layers[i].name == "mlm.decoder") return static_cast<int>(i);
      return Status::error("{}: no layer mlm.decoder, where the simulator puts the MLM head",
                           mc.spec);
    case ModelArch::kVgg:
      return -1;
  }
  return -1;
}

}  // namespace

StepInput train_step_input(const ModelLayout& layout, const ComputeTimes& compute,
                           std::vector<SimBucket> buckets) {
  StepInput in{compute.forward_s, compute.backward_s, compute.optimizer_s, std::move(buckets)};
  in.polls_stop_signals = true;
  in.counts_targets = layout.weighs_counted_targets;
  return in;
}

Result<std::unique_ptr<ModelLayout>> build_layout(const train::TrainConfig& config) {
  auto layout = std::make_unique<ModelLayout>();
  layout->model = config.model;
  // The smallest run shape: only the parameter layout is needed, not activations.
  SPARQ_ASSIGN_OR_RETURN(auto model, make_model(config.model, {1, config.model.is_language_model() ? 1 : 0}));
  model->declare(layout->store);
  layout->layers = model->layers();
  layout->tied_embedding = model->tied_embedding();
  layout->weighs_counted_targets = model->weighs_counted_targets();
  SPARQ_ASSIGN_OR_RETURN(layout->head_layer, vocab_head_layer(config.model, layout->layers));
  const comm::BucketPlanConfig plan_config = config.comm.plan;
  // Offsets only: the simulator never touches the values, and prices models far larger than
  // this host's memory.
  layout->store.lay_out([&](const ParamSpec& s) { return plan_config.is_dense(s); });
  SPARQ_RETURN_IF_ERROR(
      plan_config.check_patterns_match(layout->store).with_context(config.where()));
  auto plan = comm::BucketPlan::build(layout->store, layout->layers, plan_config);
  if (!plan.is_ok()) return plan.status().with_context(config.where() + ": comm");
  layout->plan = std::make_unique<comm::BucketPlan>(std::move(plan).value());
  if (!layout->tied_embedding.empty()) {
    const Shape& shape = layout->store.entry(layout->tied_embedding).spec.shape;
    layout->tied_rows = shape[0];
    layout->tied_dim = shape[1];
    comm::BucketPlanConfig split_config = plan_config;
    split_config.isolated = {layout->tied_embedding};
    auto split = comm::BucketPlan::build(layout->store, layout->layers, split_config);
    if (!split.is_ok()) return split.status().with_context(config.where() + ": comm");
    layout->split_plan = std::make_unique<comm::BucketPlan>(std::move(split).value());
  }
  return layout;
}

Result<bool> uses_tied_split(const ModelLayout& layout, const train::TrainConfig& config,
                             int world_size) {
  return train::resolve_tied_split(config, layout.tied_rows, world_size);
}

int leb128_bytes(std::uint64_t v) {
  int bytes = 1;
  while (v >= 128) {
    v >>= 7;
    ++bytes;
  }
  return bytes;
}

std::int64_t kept_entries(double density, std::int64_t n) {
  return std::clamp<std::int64_t>(std::llround(density * static_cast<double>(n)), 1, n);
}

double sparse_index_bytes(std::int64_t n, std::int64_t k) {
  // The encoder writes each gap less one (compress/sparse_format.cpp): a gap of 128 is 1 byte.
  const auto written_gap = static_cast<std::uint64_t>(std::max<std::int64_t>(n / k, 1) - 1);
  const double varint = static_cast<double>(k) * leb128_bytes(written_gap);
  return std::min(std::ceil(static_cast<double>(n) / 8.0), varint);
}

namespace {

std::int64_t param_or(const compress::CompressConfig& c, const std::string& key,
                      std::int64_t fallback) {
  auto it = c.params.find(key);
  return it == c.params.end() ? fallback : std::stoll(it->second);
}

// Bytes of one message for a span of n floats, for compressors without fixed_message_bytes.
Result<std::function<double(std::int64_t)>> sparse_message_formula(
    const compress::Compressor& c, const compress::CompressConfig& config) {
  const std::string name(c.name());
  if (!c.density())
    return Status::error("compress.name: {}: the simulator has no message-size formula for it",
                         name);
  const double rho = *c.density();
  if (c.capabilities().sparse_f32) {  // topk, topk_sampled, gtopk, dgc

    return std::function<double(std::int64_t)>([rho](std::int64_t n) {
      const std::int64_t k = kept_entries(rho, n);
      return 12.0 + sparse_index_bytes(n, k) + 4.0 * k;
    });
  }
  // lbs's message depends on its own bits and block keys: knowledge of that one format.
  if (name == "lbs") {
    const double bits = static_cast<double>(param_or(config, "bits", 4));
    const double block = static_cast<double>(param_or(config, "block", 256));
    return std::function<double(std::int64_t)>([rho, bits, block](std::int64_t n) {
      const std::int64_t k = kept_entries(rho, n);
      return 12.0 + sparse_index_bytes(n, k) + 2.0 * std::ceil(k / block) +
             std::ceil(k * bits / 8.0);
    });
  }
  return Status::error("compress.name: {}: the simulator has no message-size formula for it",
                       name);
}

}  // namespace

Result<std::vector<SimBucket>> simulate_buckets(const ModelLayout& layout,
                                                const train::TrainConfig& config,
                                                const MachineProfile& profile,
                                                bool tied_split) {
  SPARQ_CHECK(!tied_split || layout.split_plan, "no tied embedding to split");
  const comm::BucketPlan& plan = tied_split ? *layout.split_plan : *layout.plan;
  const int last_layer = static_cast<int>(layout.layers.size()) - 1;
  std::map<std::string, int> layer_of;
  for (std::size_t i = 0; i < layout.layers.size(); ++i)
    for (const std::string& t : layout.layers[i].tensors) layer_of[t] = static_cast<int>(i);
  const compress::CompressConfig& cc = config.compress.compress;
  const bool compressing = !cc.compression_off();

  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<compress::Compressor> probe, make_compressor(cc));
  const compress::CompressorCapabilities caps = probe->capabilities();
  compress::Aggregation aggregation = probe->aggregation();
  if (compressing) {
    // The combinations the trainer refuses (the registry's accepts()) are refused here too.
    SPARQ_RETURN_IF_ERROR(compress::make_aggregator(config.compress.aggregation, *probe,
                                                    config.compress.aggregator,
                                                    config.compress.aggregation_key)
                              .status());
  }
  if (config.compress.aggregation != "auto") {
    auto built_in =
        compress::parse_aggregation(config.compress.aggregation, config.compress.aggregation_key);
    if (!built_in.is_ok()) {
      // A registered strategy passed make_aggregator above, but the simulator's cost model
      // knows only the built-in collectives (and so does comm.plan: auto, which uses it).
      return Status::error(
          "{}: '{}' is a registered aggregation strategy, which the step simulator cannot "
          "price: it models the built-in ones only ({}); simulate and comm.plan: auto need one "
          "of them",
          config.compress.aggregation_key, config.compress.aggregation,
          fmt::join(compress::kAggregations | std::views::transform(compress::aggregation_name),
                    ", "));
    }
    aggregation = *built_in;
  }
  CodecRate codec;
  double decode_scale = 1, fill_gbps = 0;
  if (compressing) {
    auto it = profile.codecs.find(cc.name);
    if (it == profile.codecs.end())
      return Status::error("profile {}: codecs.{}: missing (compress.name is {})", profile.name,
                           cc.name, cc.name);
    codec = it->second;
    // SimBucket::decode_scale: the profile timed the decode at the default density; priced
    // per float whatever the density, a run at 1e-4 paid 1%'s decode, 256 times a step at
    // P = 256 (review, 2026-12-07).
    SPARQ_ASSIGN_OR_RETURN(auto as_measured, compress::make_compressor(
                                                 compress::CompressConfig{cc.name, {}, cc.prefix}));
    if (probe->density() && as_measured->density() && *as_measured->density() > 0) {
      decode_scale = *probe->density() / *as_measured->density();
      // SimBucket::fill_gbps: memory bandwidth where the profile has it, else the dense f32
      // add-decode's rate, which moves 12 bytes per float where a fill writes 4.
      const auto none = profile.codecs.find("none");
      if (profile.flops && profile.flops->memory_gbps > 0) {
        fill_gbps = profile.flops->memory_gbps;
      } else if (none != profile.codecs.end()) {
        fill_gbps = 3 * none->second.decode_gbps;
      }
    }
  }
  std::function<double(std::int64_t)> formula;
  // A layout-dependent message (needs_matrix_layout) is sized per bucket after set_layout.
  if (compressing && !probe->fixed_message_bytes(1024) && !caps.needs_matrix_layout) {
    SPARQ_ASSIGN_OR_RETURN(formula, sparse_message_formula(*probe, cc));
  }

  std::vector<SimBucket> out;
  for (const comm::Bucket& bucket : plan.buckets()) {
    SimBucket b;
    b.index = bucket.index;
    b.numel = bucket.range.count;
    b.ready_layer = last_layer;
    for (const std::string& t : bucket.tensors) {
      // Split, the table is reported right after the head's backward (the last layer's
      // interval); isolated, its buckets hold nothing else.
      const bool early = tied_split && t == layout.tied_embedding;
      b.ready_layer = std::min(b.ready_layer, early ? last_layer : layer_of.at(t));
    }
    if (bucket.dense || !compressing) {
      // f32 whatever the compressor: GradientExchange builds none for a plan-dense bucket and
      // averages it in place (found in review: the bf16 cell priced them at 2 bytes a float).
      b.kind = CommKind::kDenseAllreduce;
      b.wire_elem_bytes = 4;
      out.push_back(std::move(b));
      continue;
    }
    b.codec = codec;
    b.decode_scale = decode_scale;
    b.fill_gbps = fill_gbps;
    if (aggregation == compress::Aggregation::kLowRank) {
      SPARQ_ASSIGN_OR_RETURN(auto made, make_compressor(cc));
      SPARQ_RETURN_IF_ERROR(made->set_layout(static_cast<std::size_t>(b.numel),
                                             compress::bucket_matrices(layout.store, bucket))
                                .with_context(fmt::format("bucket {}", bucket.index)));
      // low_rank carries powersgd alone (its accepts()), and how its message splits between
      // the two allreduces (the Q factors: cols * rank of each compressed matrix) is
      // powersgd's own layout: per-compressor knowledge, hence the cast.
      const auto& psgd = dynamic_cast<const compress::PowerSgdCompressor&>(*made);
      const double total = static_cast<double>(*psgd.fixed_message_bytes(b.numel));
      double p = 0, q = 0;
      const double rank = static_cast<double>(param_or(cc, "rank", 4));
      for (const auto& m : psgd.matrices()) {
        p += 4.0 * static_cast<double>(m.rows) * rank;
        q += 4.0 * static_cast<double>(m.cols) * rank;
      }
      b.kind = CommKind::kPowerSgd;
      if (psgd.alternate()) {
        // One allreduce a step, P and Q factors in turn, each with the dense floats
        // (powersgd.h): priced at their mean, with no second allreduce.
        b.p_bytes = (total - p - q) + 0.5 * (p + q);
        b.q_bytes = 0;
      } else {
        b.p_bytes = total - q;  // P with the dense floats
        b.q_bytes = q;
      }
      out.push_back(std::move(b));
      continue;
    }
    if (aggregation == compress::Aggregation::kAllreduce) {
      b.kind = CommKind::kAllreduce;
      b.wire_elem_bytes = static_cast<double>(dtype_size(probe->wire_dtype()));
      out.push_back(std::move(b));
      continue;
    }
    if (formula) {
      b.message_bytes = formula;
    } else {
      b.message_bytes = [probe](std::int64_t n) {
        return static_cast<double>(*probe->fixed_message_bytes(static_cast<std::size_t>(n)));
      };
    }
    const double rho = probe->density().value_or(1.0);
    b.kept = [rho](std::int64_t n) { return static_cast<double>(kept_entries(rho, n)); };
    b.kind = aggregation == compress::Aggregation::kAllgather ? CommKind::kAllgather
             : aggregation == compress::Aggregation::kTwoPhase ? CommKind::kTwoPhase
                                                               : CommKind::kTree;
    b.server_compression = config.compress.aggregator.server_compression;
    // The trees' own rule (a sparse f32, reselectable list merges as pairs even when it could
    // by encode): the flag alone priced such a compressor's cheap merges as decode + encode
    // (review, 2026-12-07).
    b.merges_by_encode = compress::tree_merges_by_encode(caps);
    // Steady state: the density warm-up, which sends sizes even for fixed ones, is not priced.
    b.sizes_exchanged = !probe->fixed_message_bytes(static_cast<std::size_t>(b.numel));
    out.push_back(std::move(b));
  }
  if (tied_split) {
    SimBucket rows;
    rows.index = static_cast<int>(plan.size());  // after every bucket: a tail job
    rows.ready_layer = 0;
    rows.kind = CommKind::kTiedRows;
    rows.rows = std::min<std::int64_t>(
        static_cast<std::int64_t>(config.train.micro_batch) * config.data.seq_len,
        layout.tied_rows);
    rows.dim = layout.tied_dim;
    rows.numel = rows.rows * rows.dim;
    out.push_back(std::move(rows));
  }
  return out;
}

}  // namespace sparq::sim
