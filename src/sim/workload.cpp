// The simulator's workload (workload.h): the real layout and bucket plan, per-layer compute,
// and each bucket's messages for the cell's compressor.
#include "sim/workload.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ranges>

#include "compress/aggregation.h"
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

Result<std::unique_ptr<ModelLayout>> build_layout(const train::TrainConfig& config) {
  auto layout = std::make_unique<ModelLayout>();
  layout->model = config.model;
  // The smallest run shape: only the parameter layout is needed, not activations.
  SPARQ_ASSIGN_OR_RETURN(auto model, make_model(config.model, {1, config.model.is_language_model() ? 1 : 0}));
  model->declare(layout->store);
  layout->layers = model->layers();
  layout->tied_embedding = model->tied_embedding();
  const comm::BucketPlanConfig plan_config = config.comm.plan;
  layout->store.allocate(ExecContext::cpu(),
                         [&](const ParamSpec& s) { return plan_config.is_dense(s); });
  auto plan = comm::BucketPlan::build(layout->store, layout->layers, plan_config);
  if (!plan.is_ok()) return plan.status().with_context(config.origin + ": comm");
  layout->plan = std::make_unique<comm::BucketPlan>(std::move(plan).value());
  if (!layout->tied_embedding.empty()) {
    const Shape& shape = layout->store.entry(layout->tied_embedding).spec.shape;
    layout->tied_rows = shape[0];
    layout->tied_dim = shape[1];
    comm::BucketPlanConfig split_config = plan_config;
    split_config.isolated = {layout->tied_embedding};
    auto split = comm::BucketPlan::build(layout->store, layout->layers, split_config);
    if (!split.is_ok()) return split.status().with_context(config.origin + ": comm");
    layout->split_plan = std::make_unique<comm::BucketPlan>(std::move(split).value());
  }
  return layout;
}

Result<bool> uses_tied_split(const ModelLayout& layout, const train::TrainConfig& config,
                             int world_size) {
  return train::resolve_tied_split(config, layout.tied_rows, world_size);
}

namespace {

// Whether the measured profile's model spec describes the same parameters as `model`.
bool same_model(const ModelConfig& a, const ModelConfig& b) {
  return a.arch == b.arch && a.n_layer == b.n_layer && a.n_head == b.n_head &&
         a.n_embd == b.n_embd && a.n_ctx == b.n_ctx && a.padded_vocab() == b.padded_vocab() &&
         a.ffn_dim == b.ffn_dim && a.type_vocab_size == b.type_vocab_size && a.nsp == b.nsp &&
         a.layout == b.layout && a.num_classes == b.num_classes;
}

Result<ComputeTimes> measured_times(const ModelLayout& layout, const MeasuredCompute& m,
                                    std::int64_t micro_batch, std::int64_t seq_len) {
  if (m.layers.size() != layout.layers.size())
    return Status::error("compute.measured.layers: {} layers, the model has {}", m.layers.size(),
                         layout.layers.size());
  // A language model's time scales with its tokens: a seq_len of 0 was taken as 1 and scaled
  // the compute by the config's whole sequence length (review, 2026-12-05).
  if (layout.model.is_language_model() && m.seq_len < 1) {
    return Status::error("compute.measured.seq_len: {} for a language model; it must be at least 1",
                         m.seq_len);
  }
  const double tokens = static_cast<double>(micro_batch) * std::max<std::int64_t>(seq_len, 1);
  const double measured_tokens =
      static_cast<double>(m.micro_batch) * std::max<std::int64_t>(m.seq_len, 1);
  const double scale = tokens / measured_tokens;
  ComputeTimes t;
  t.source = "measured";
  t.forward_s = m.forward_ms * 1e-3 * scale;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (m.layers[i].name != layout.layers[i].name)
      return Status::error("compute.measured.layers[{}].name: '{}', the model's layer is '{}'", i,
                           m.layers[i].name, layout.layers[i].name);
    t.backward_s.push_back(m.layers[i].backward_ms * 1e-3 * scale);
  }
  t.optimizer_s = m.optimizer_ns_per_param * 1e-9 * static_cast<double>(layout.store.param_count());
  return t;
}

Result<ComputeTimes> flop_times(const ModelLayout& layout, const FlopCompute& f,
                                std::int64_t micro_batch, std::int64_t seq_len) {
  const ModelConfig& mc = layout.model;
  if (!mc.is_language_model())
    return Status::error("compute.flops models transformers only; {} needs compute.measured",
                         mc.spec);
  const double flop_s = 1.0 / (f.matmul_tflops * 1e12);
  const double byte_s = 1.0 / (f.memory_gbps * 1e9);
  const double b = static_cast<double>(micro_batch), t = static_cast<double>(seq_len);
  const double c = static_cast<double>(mc.n_embd), tokens = b * t;
  const auto first_attn = std::find_if(layout.layers.begin(), layout.layers.end(), [](auto& l) {
    return l.name.find("attn") != std::string::npos;
  });
  ComputeTimes out;
  out.source = "flops";
  for (auto it = layout.layers.begin(); it != layout.layers.end(); ++it) {
    double matrix_params = 0;
    for (const std::string& name : it->tensors) {
      const ParamEntry& e = layout.store.entry(name);
      if (e.spec.shape.ndim() >= 2) matrix_params += static_cast<double>(e.numel);
    }
    double forward = 0;
    if (it < first_attn || matrix_params == 0) {
      forward = 8.0 * tokens * c * byte_s;  // embeddings and norms: memory traffic
    } else {
      forward = 2.0 * matrix_params * tokens * flop_s;
      if (it->name.find("attn") != std::string::npos) forward += 4.0 * t * t * c * b * flop_s;
    }
    out.forward_s += forward;
    out.backward_s.push_back(2.0 * forward);
  }
  if (!layout.tied_embedding.empty()) {
    const double head = 2.0 * static_cast<double>(mc.padded_vocab()) * c * tokens * flop_s;
    out.forward_s += head;
    out.backward_s.back() += 2.0 * head;
  }
  out.optimizer_s = f.optimizer_ns_per_param * 1e-9 * static_cast<double>(layout.store.param_count());
  return out;
}

}  // namespace

Result<ComputeTimes> compute_times(const ModelLayout& layout, const MachineProfile& profile,
                                   std::int64_t micro_batch, std::int64_t seq_len) {
  std::string why;
  if (profile.measured) {
    auto measured_model = parse_model_spec(profile.measured->model);
    if (!measured_model.is_ok()) {
      why = measured_model.status().message();
    } else if (!same_model(*measured_model, layout.model)) {
      why = fmt::format("compute.measured.model '{}' is not {}", profile.measured->model,
                        layout.model.spec);
    } else {
      auto t = measured_times(layout, *profile.measured, micro_batch, seq_len);
      if (t.is_ok()) return t;
      if (!profile.flops) return t.status().with_context(fmt::format("profile {}", profile.name));
      why = t.status().message();
    }
  }
  if (profile.flops) {
    auto t = flop_times(layout, *profile.flops, micro_batch, seq_len);
    if (!t.is_ok()) return t.status().with_context(fmt::format("profile {}", profile.name));
    return t;
  }
  return Status::error("profile {}: no compute for {}: {}", profile.name, layout.model.spec,
                       why.empty() ? "neither compute.measured nor compute.flops" : why);
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

// Whole rows of every 2-D tensor inside the bucket: the matrices powersgd compresses.
std::vector<compress::MatrixSegment> bucket_segments(const ParamStore& store,
                                                     const comm::Bucket& bucket) {
  std::vector<compress::MatrixSegment> out;
  for (const ParamEntry& e : store.entries()) {
    if (e.spec.shape.ndim() < 2 || e.numel == 0) continue;
    const std::int64_t lo = std::max(e.offset, bucket.range.offset);
    const std::int64_t hi = std::min(e.range().end(), bucket.range.end());
    if (hi <= lo) continue;
    const std::int64_t cols = e.numel / e.spec.shape[0];
    const std::int64_t row_lo = (lo - e.offset + cols - 1) / cols, row_hi = (hi - e.offset) / cols;
    if (row_hi <= row_lo) continue;
    out.push_back({e.spec.name, static_cast<std::size_t>(e.offset + row_lo * cols - bucket.range.offset),
                   static_cast<std::size_t>(row_hi - row_lo), static_cast<std::size_t>(cols)});
  }
  return out;
}

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
  if (compressing) {
    auto it = profile.codecs.find(cc.name);
    if (it == profile.codecs.end())
      return Status::error("profile {}: codecs.{}: missing (compress.name is {})", profile.name,
                           cc.name, cc.name);
    codec = it->second;
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
    if (aggregation == compress::Aggregation::kLowRank) {
      SPARQ_ASSIGN_OR_RETURN(auto made, make_compressor(cc));
      SPARQ_RETURN_IF_ERROR(made->set_layout(static_cast<std::size_t>(b.numel),
                                             bucket_segments(layout.store, bucket))
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
    b.merges_by_encode = caps.merges_by_encode;
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
