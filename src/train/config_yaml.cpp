// The effective configuration as YAML: every key the reader knows, with the value in force
// (the file's, an override's or the default). Printed by --dry-run and stored in checkpoints,
// and it reads back to the same configuration (tested), so it can be saved and rerun.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "train/train_config.h"

namespace sparq::train {
namespace {

// A text setting as YAML reads it back: plain when it is a word or number (as configs write
// them), else quoted. Written plain, an in-code value "0.1 # note" read back as 0.1, one with
// a line break as YAML structure ("train: set twice"), and "-" as a block entry, a YAML error
// (review, 2026-12-07).
std::string quoted(const std::string& s);
std::string plain_or_quoted(const std::string& s) {
  const bool plain = !s.empty() && s != "-" && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '+' ||
           ch == '-';
  });
  return plain ? s : quoted(s);
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (byte < 0x20 || byte == 0x7f) {
      // Raw line breaks and tabs would be folded into spaces when read back (fuzzing), and
      // YAML forbids other control characters: all are written as escapes.
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string flow_list(const std::vector<std::string>& items) {
  std::vector<std::string> q;
  for (const auto& i : items) q.push_back(quoted(i));
  return fmt::format("[{}]", fmt::join(q, ", "));
}

const char* yes_no(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string effective_yaml(const TrainConfig& c) {
  std::ostringstream y;
  // model: the preset plus the overrides recorded in its spec ("preset k=v k=v").
  y << "model:\n  preset: " << plain_or_quoted(c.model.preset) << "\n";
  std::istringstream spec(c.model.spec);
  std::string word;
  spec >> word;  // the preset
  while (spec >> word) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) {
      y << "  " << word.substr(0, eq) << ": " << word.substr(eq + 1) << "\n";
    }
  }
  const DataConfig& d = c.data;
  y << "data:\n"
    << fmt::format("  source: {}\n  train: {}\n  eval: {}\n  seq_len: {}\n",
                   plain_or_quoted(d.source), quoted(d.train_path), quoted(d.eval_path), d.seq_len)
    << fmt::format(
           "  markov:\n    vocab_size: {}\n    order: {}\n    branching: {}\n"
           "    smoothing: {}\n    seed: {}\n    train_tokens: {}\n    eval_tokens: {}\n",
           d.markov.vocab_size, d.markov.order, d.markov.branching, d.markov.smoothing,
           d.markov.seed, d.markov_train_tokens, d.markov_eval_tokens)
    << fmt::format("  mask_prob: {}\n  cls_id: {}\n  sep_id: {}\n  mask_id: {}\n  pad_id: {}\n",
                   d.mask_prob, d.cls_id, d.sep_id, d.mask_id, d.pad_id)
    << fmt::format("  augment: {}\n  synthetic:\n    train_images: {}\n    eval_images: {}\n",
                   yes_no(d.augment), d.synthetic_train_images, d.synthetic_eval_images);
  const optim::OptimConfig& o = c.optim;
  const optim::LrScheduleConfig& s = c.schedule;
  y << "optim:\n"
    << fmt::format(
           "  name: {}\n  lr: {}\n  weight_decay: {}\n  momentum: {}\n  dampening: {}\n"
           "  nesterov: {}\n  beta1: {}\n  beta2: {}\n  eps: {}\n  freeze_steps: {}\n",
           plain_or_quoted(o.name), s.lr, o.weight_decay, o.momentum, o.dampening,
           yes_no(o.nesterov), o.beta1, o.beta2, o.eps, o.freeze_steps)
    << fmt::format("  communicate: {}\n  frozen_variance_floor: {}\n  clip_scope: {}\n",
                   plain_or_quoted(o.communicate), o.frozen_variance_floor,
                   plain_or_quoted(c.clip_scope))
    << fmt::format(
           "  clip_norm: {}\n  schedule: {}\n  warmup_steps: {}\n  min_lr: {}\n"
           "  step_size: {}\n  gamma: {}\n",
           c.clip_norm, plain_or_quoted(s.kind), s.warmup_steps, s.min_lr, s.step_size, s.gamma);
  const compress::GradientExchangeConfig& x = c.compress;
  const std::string& aggregation = x.aggregation;
  y << "compress:\n"
    << fmt::format(
           "  name: {}\n  error_feedback: {}\n  aggregation: {}\n"
           "  server_compression: {}\n  dense_warmup_steps: {}\n  seed: {}\n",
           plain_or_quoted(x.compress.name), yes_no(x.error_feedback), plain_or_quoted(aggregation),
           yes_no(x.aggregator.server_compression), x.dense_warmup_steps, x.seed)
    << fmt::format("  density_warmup_steps: {}\n", x.density_warmup_steps);
  if (!x.compress.params.empty()) {
    y << "  " << plain_or_quoted(x.compress.name) << ":\n";
    for (const auto& [k, v] : x.compress.params)
      y << "    " << plain_or_quoted(k) << ": " << plain_or_quoted(v) << "\n";
  }
  const CommConfig& m = c.comm;
  y << "comm:\n"
    << fmt::format(
           "  backend: {}\n  allreduce: {}\n  mpi_wait: {}\n  first_bucket_mb: {}\n"
           "  bucket_mb: {}\n"
           "  min_compress_numel: {}\n  dense_patterns: {}\n  overlap: {}\n"
           "  timeout_s: {}\n  emulate:\n    gbit_per_s: {}\n    latency_us: {}\n"
           "    ranks: {}\n  split_tied_embedding: {}\n",
           plain_or_quoted(m.backend), plain_or_quoted(m.allreduce), plain_or_quoted(m.mpi_wait),
           m.plan.first_bucket_mb, m.plan.bucket_mb, m.plan.min_compress_numel,
           flow_list(m.plan.dense_patterns), yes_no(m.overlap), m.timeout_s, m.emulate.gbit_per_s,
           m.emulate.latency_us, m.emulate.ranks, plain_or_quoted(m.split_tied_embedding))
    << fmt::format(
           "  plan: {}\n  plan_profile: {}\n  plan_network: {}\n"
           "  plan_min_compression: {}\n",
           plain_or_quoted(m.plan_mode), quoted(m.plan_profile), quoted(m.plan_network),
           m.plan_min_compression);
  const LoopConfig& t = c.train;
  y << "train:\n"
    << fmt::format(
           "  steps: {}\n  micro_batch: {}\n  accumulation: {}\n  eval_interval: {}\n"
           "  eval_batches: {}\n  checkpoint_interval: {}\n  checkpoint_dir: {}\n"
           "  keep_checkpoints: {}\n",
           t.steps, t.micro_batch, t.accumulation, t.eval_interval, t.eval_batches,
           t.checkpoint_interval, quoted(t.checkpoint_dir), t.keep_checkpoints)
    << fmt::format(
           "  seed: {}\n  max_nonfinite_in_a_row: {}\n  threads: {}\n  init_from: {}\n"
           "  init_format: {}\n  device: {}\n  precision: {}\n",
           t.seed, t.max_nonfinite_in_a_row, t.threads, quoted(t.init_from),
           plain_or_quoted(t.init_format), device_name(t.device), plain_or_quoted(t.precision));
  const LogConfig& l = c.log;
  y << "log:\n"
    << fmt::format("  metrics: {}\n  progress_interval: {}\n  per_rank_timing: {}\n"
                   "  trace: {}\n  trace_start: {}\n  trace_steps: {}\n",
                   quoted(l.metrics_path), l.progress_interval, yes_no(l.per_rank_timing),
                   quoted(l.trace_path), l.trace_start, l.trace_steps)
    << fmt::format("  never_sent_window: {}\n", l.never_sent_window);
  return y.str();
}

namespace {

// Dotted key -> the value as flow YAML, for every leaf of `node`.
void flatten(const YAML::Node& node, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      flatten(entry.second, prefix.empty() ? key : prefix + "." + key, out);
    }
    return;
  }
  YAML::Emitter e;
  e << YAML::Flow << node;
  out[prefix] = e.c_str();
}

}  // namespace

std::optional<std::string> config_setting(const std::string& yaml, const std::string& key) {
  std::map<std::string, std::string> leaves;
  try {
    flatten(YAML::Load(yaml), "", leaves);
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
  const auto it = leaves.find(key);
  if (it == leaves.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> config_differences(const std::string& before, const std::string& after) {
  std::map<std::string, std::string> a, b;
  try {
    flatten(YAML::Load(before), "", a);
    flatten(YAML::Load(after), "", b);
  } catch (const YAML::Exception& e) {
    return {fmt::format("(the configs cannot be compared: {})", e.what())};
  }
  std::vector<std::string> out;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end()) {
      out.push_back(fmt::format("{}: {} -> (none)", key, value));
    } else if (it->second != value) {
      out.push_back(fmt::format("{}: {} -> {}", key, value, it->second));
    }
  }
  for (const auto& [key, value] : b) {
    if (!a.count(key)) out.push_back(fmt::format("{}: (none) -> {}", key, value));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace sparq::train
