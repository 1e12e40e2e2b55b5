// The simulator's per-layer compute (workload.h, "compute"): from a measured profile of the same
// model, scaled by tokens, else from the profile's FLOP model.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "sim/workload.h"

namespace sparq::sim {

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
      // BERT's pooler and NSP classifier read the [CLS] row of each sequence only: charged
      // for every token, they were priced T times over (review, 2026-12-07).
      const bool per_sequence = it->name == "pooler" || it->name == "nsp";
      forward = 2.0 * matrix_params * (per_sequence ? b : tokens) * flop_s;
      if (it->name.find("attn") != std::string::npos) forward += 4.0 * t * t * c * b * flop_s;
    }
    out.forward_s += forward;
    out.backward_s.push_back(2.0 * forward);
  }
  if (layout.head_layer >= 0) {
    const double head = 2.0 * static_cast<double>(mc.padded_vocab()) * c * tokens * flop_s;
    out.forward_s += head;
    out.backward_s[static_cast<std::size_t>(layout.head_layer)] += 2.0 * head;
  }
  out.optimizer_s =
      f.optimizer_ns_per_param * 1e-9 * static_cast<double>(layout.store.param_count());
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

}  // namespace sparq::sim
