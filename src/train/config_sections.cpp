// The config's top-level sections, one reader each (train/config_sections.h); compress and
// comm are in config_sections_exchange.cpp.
#include "train/config_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "data/image_dataset.h"
#include "data/markov_source.h"
#include "models/model_registry.h"

namespace sparq::train::config_sections {

Status read_model(YamlReader& r, TrainConfig& c) {
  std::string preset = "gpt2-tiny";
  std::vector<std::string> presets = model_preset_names();
  for (std::string& name : registered_model_names()) presets.push_back(std::move(name));
  SPARQ_RETURN_IF_ERROR(r.get_choice("model.preset", &preset, presets));
  std::vector<std::pair<std::string, std::string>> keys, overrides;
  SPARQ_RETURN_IF_ERROR(r.take_section("model", &keys));
  for (auto& [key, value] : keys) {
    if (key != "preset") overrides.emplace_back(key, value);
  }
  auto model = make_model_config(preset, overrides);
  if (!model.is_ok()) return model.status().with_context(r.where() + ": model");
  c.model = std::move(model).value();
  return Status::ok();
}

Status read_data(YamlReader& r, TrainConfig& c) {
  DataConfig& d = c.data;
  SPARQ_RETURN_IF_ERROR(
      r.get_choice("data.source", &d.source, {"markov", "shard", "cifar10", "synthetic_images"}));
  SPARQ_RETURN_IF_ERROR(r.get("data.train", &d.train_path));
  SPARQ_RETURN_IF_ERROR(r.get("data.eval", &d.eval_path));
  SPARQ_RETURN_IF_ERROR(r.get("data.seq_len", &d.seq_len, {.min = 1, .max = 1 << 20}));
  std::int64_t vocab = d.markov.vocab_size, seed = static_cast<std::int64_t>(d.markov.seed);
  SPARQ_RETURN_IF_ERROR(r.get("data.markov.vocab_size", &vocab, {.min = 2, .max = 1 << 24}));
  SPARQ_RETURN_IF_ERROR(r.get("data.markov.order", &d.markov.order, {.min = 1, .max = 8}));
  SPARQ_RETURN_IF_ERROR(r.get("data.markov.branching", &d.markov.branching, {.min = 1}));
  SPARQ_RETURN_IF_ERROR(
      r.get("data.markov.smoothing", &d.markov.smoothing, {.min = 1e-9, .max = 1}));
  SPARQ_RETURN_IF_ERROR(r.get("data.markov.seed", &seed, {.min = 0}));
  d.markov.vocab_size = static_cast<std::uint32_t>(vocab);
  d.markov.seed = static_cast<std::uint64_t>(seed);
  // Generated in memory as 32-bit tokens: 2^31 of them are 8 GiB (more died in bad_alloc).
  SPARQ_RETURN_IF_ERROR(
      r.get("data.markov.train_tokens", &d.markov_train_tokens, {.min = 2, .max = 1LL << 31}));
  SPARQ_RETURN_IF_ERROR(
      r.get("data.markov.eval_tokens", &d.markov_eval_tokens, {.min = 2, .max = 1LL << 31}));
  SPARQ_RETURN_IF_ERROR(r.get("data.mask_prob", &d.mask_prob, {.min = 1e-6, .max = 1}));
  for (auto [key, out] : {std::pair{"data.cls_id", &d.cls_id},
                          {"data.sep_id", &d.sep_id},
                          {"data.mask_id", &d.mask_id},
                          {"data.pad_id", &d.pad_id}}) {
    // Below 2^31: they become 32-bit token ids (a larger one wrapped past the vocabulary check).
    SPARQ_RETURN_IF_ERROR(r.get(key, out, {.min = 0, .max = INT32_MAX}));
  }
  SPARQ_RETURN_IF_ERROR(r.get("data.augment", &d.augment));
  SPARQ_RETURN_IF_ERROR(
      r.get("data.synthetic.train_images", &d.synthetic_train_images, {.min = 1}));
  SPARQ_RETURN_IF_ERROR(r.get("data.synthetic.eval_images", &d.synthetic_eval_images, {.min = 1}));

  const bool lm = c.model.is_language_model();
  const bool text = d.source == "markov" || d.source == "shard";
  if (lm != text) {
    return Status::error("{}: data.source: '{}' cannot feed model '{}' ({} data needed)", r.where(),
                         d.source, c.model.preset, lm ? "token" : "image");
  }
  if ((d.source == "shard" || d.source == "cifar10") && d.train_path.empty()) {
    return Status::error("{}: data.train: required for data.source '{}'", r.where(), d.source);
  }
  // A path the source never reads is a setting silently ignored: with the default source,
  // "data: {train: wt2/train.bin}" trained on Markov text (review, 2026-12-05).
  const bool reads_train = d.source == "shard" || d.source == "cifar10";
  const bool reads_eval = d.source == "shard";  // CIFAR-10 evaluates on data.train's test batch
  for (const auto& [key, path, read] : {std::tuple{"data.train", &d.train_path, reads_train},
                                        std::tuple{"data.eval", &d.eval_path, reads_eval}}) {
    if (!path->empty() && !read) {
      return Status::error(
          "{}: {}: '{}' is given, but data.source '{}' does not read it (set data.source, or "
          "leave {} empty)",
          r.where(), key, *path, d.source, key);
    }
  }
  if (lm && d.seq_len > c.model.n_ctx) {
    return Status::error("{}: data.seq_len: {} exceeds the model's n_ctx {}", r.where(), d.seq_len,
                         c.model.n_ctx);
  }
  if (lm) {  // here, not only in make_model: a dry run builds its model for one row
    SPARQ_RETURN_IF_ERROR(check_attention_dropout_draws(c.model, c.train.micro_batch, d.seq_len)
                              .with_context(r.where()));
  }
  if (d.source == "markov" && d.markov.vocab_size > c.model.vocab_size) {
    return Status::error("{}: data.markov.vocab_size: {} exceeds the model's vocab_size {}",
                         r.where(), d.markov.vocab_size, c.model.vocab_size);
  }
  if (d.source == "markov" && d.markov.branching > static_cast<int>(d.markov.vocab_size)) {
    return Status::error(
        "{}: data.markov.branching: {} exceeds data.markov.vocab_size {} (the "
        "successors of a context are distinct tokens)",
        r.where(), d.markov.branching, d.markov.vocab_size);
  }
  if (d.source == "markov") {
    // The chain's tables (data/markov_source.h's limits), said here with the keys, not at
    // start-up without them.
    if (const Status size = data::MarkovChain::check_size(d.markov); !size.is_ok()) {
      return Status::error("{}: data.markov: {}", r.where(), size.message());
    }
  }
  if (c.model.arch == ModelArch::kBert && d.seq_len < 3) {
    return Status::error(
        "{}: data.seq_len: {} leaves no token between BERT's [CLS] and [SEP] "
        "(at least 3)",
        r.where(), d.seq_len);
  }
  // BERT's special ids are tokens of its inputs: below the model's vocabulary, and for the
  // Markov source below the chain's, whose ids the loader checks them against (review,
  // 2026-12-07: the error came at start-up naming data.markov.train_tokens and no id key).
  if (c.model.arch == ModelArch::kBert) {
    const std::pair<const char*, std::int64_t> ids[] = {{"data.cls_id", d.cls_id},
                                                        {"data.sep_id", d.sep_id},
                                                        {"data.mask_id", d.mask_id},
                                                        {"data.pad_id", d.pad_id}};
    // Two roles on one id: masked positions read as [CLS], or padding as [SEP], and the
    // loader's masking and attention mask mix them up (review, 2026-12-06: accepted).
    for (std::size_t i = 0; i < std::size(ids); ++i) {
      for (std::size_t j = i + 1; j < std::size(ids); ++j) {
        if (ids[i].second == ids[j].second) {
          return Status::error(
              "{}: {} and {} are both {}: BERT's special tokens need ids of "
              "their own",
              r.where(), ids[i].first, ids[j].first, ids[i].second);
        }
      }
    }
    for (const auto& [key, id] : ids) {
      const bool markov = d.source == "markov";
      const std::int64_t vocab =
          markov ? static_cast<std::int64_t>(d.markov.vocab_size) : c.model.vocab_size;
      if (id >= vocab) {
        return Status::error(
            "{}: {}: {} is not below {} ({}): BERT's special tokens are ids of "
            "its inputs",
            r.where(), key, id, markov ? "data.markov.vocab_size" : "model.vocab_size", vocab);
      }
    }
  }
  // Both image sources give 3 x 32 x 32 images with labels 0..9 (data/image_dataset.h);
  // synthetic ones draw labels below model.num_classes.
  if (!lm && (c.model.image_size != data::ImageDataset::kHeight ||
              c.model.in_channels != data::ImageDataset::kChannels)) {
    return Status::error(
        "{}: model.image_size {} and model.in_channels {} do not fit "
        "data.source '{}', whose images are {} x {} with {} channels",
        r.where(), c.model.image_size, c.model.in_channels, d.source, data::ImageDataset::kHeight,
        data::ImageDataset::kWidth, data::ImageDataset::kChannels);
  }
  if (d.source == "cifar10" && c.model.num_classes < 10) {
    return Status::error("{}: model.num_classes: {} is fewer than CIFAR-10's 10 classes", r.where(),
                         c.model.num_classes);
  }
  if (d.source == "synthetic_images" && c.model.num_classes > data::ImageDataset::kMaxClasses) {
    return Status::error(
        "{}: model.num_classes: {} exceeds {}, the most data.source 'synthetic_images' can "
        "label (its labels are bytes)",
        r.where(), c.model.num_classes, data::ImageDataset::kMaxClasses);
  }
  return Status::ok();
}

Status read_optim(YamlReader& r, TrainConfig& c) {
  optim::OptimConfig& o = c.optim;
  optim::LrScheduleConfig& s = c.schedule;
  SPARQ_RETURN_IF_ERROR(r.get_choice("optim.name", &o.name, {"sgd", "adam", "adamw"}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.lr", &s.lr, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.weight_decay", &o.weight_decay, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.momentum", &o.momentum, {.min = 0, .max = 0.999999}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.dampening", &o.dampening, {.min = 0, .max = 1}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.nesterov", &o.nesterov));
  SPARQ_RETURN_IF_ERROR(r.get("optim.beta1", &o.beta1, {.min = 0, .max = optim::kMaxBeta}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.beta2", &o.beta2, {.min = 0, .max = optim::kMaxBeta}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.eps", &o.eps, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(
      r.get_choice("optim.communicate", &o.communicate, {"gradient", "momentum", "update"}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.freeze_steps", &o.freeze_steps, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(
      r.get("optim.frozen_variance_floor", &o.frozen_variance_floor, {.min = 0, .max = 1}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.clip_norm", &c.clip_norm, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(
      r.get_choice("optim.clip_scope", &c.clip_scope, {"auto", "aggregate", "local"}));
  if (c.clip_scope == "aggregate" && o.communicate != "gradient") {
    return Status::error(
        "{}: optim.clip_scope: aggregate clips a gradient, but with "
        "optim.communicate: {} the aggregate is {}; use local or auto",
        r.where(), o.communicate, o.communicate == "update" ? "an update" : "momentum");
  }
  SPARQ_RETURN_IF_ERROR(
      r.get_choice("optim.schedule", &s.kind, {"constant", "step", "linear", "cosine"}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.warmup_steps", &s.warmup_steps, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.min_lr", &s.min_lr, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.step_size", &s.step_size, {.min = 1}));
  SPARQ_RETURN_IF_ERROR(r.get("optim.gamma", &s.gamma, {.min = 0, .max = 1}));
  s.total_steps = c.train.steps;  // decays end with the run
  if ((s.kind == "cosine" || s.kind == "linear") && s.warmup_steps >= s.total_steps) {
    return Status::error(
        "{}: optim.warmup_steps: {} must be below train.steps ({}) for the {} "
        "schedule",
        r.where(), s.warmup_steps, s.total_steps, s.kind);
  }
  SPARQ_RETURN_IF_ERROR(o.validate("optim.").with_context(r.where()));
  SPARQ_RETURN_IF_ERROR(s.validate("optim.").with_context(r.where()));
  return Status::ok();
}

Status read_loop(YamlReader& r, TrainConfig& c) {
  LoopConfig& t = c.train;
  SPARQ_RETURN_IF_ERROR(r.get("train.steps", &t.steps, {.min = 1, .max = kMaxSteps}));
  SPARQ_RETURN_IF_ERROR(r.get("train.micro_batch", &t.micro_batch, {.min = 1, .max = 1 << 20}));
  SPARQ_RETURN_IF_ERROR(r.get("train.accumulation", &t.accumulation, {.min = 1, .max = 1 << 16}));
  SPARQ_RETURN_IF_ERROR(r.get("train.eval_interval", &t.eval_interval, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("train.eval_batches", &t.eval_batches, {.min = 1}));
  SPARQ_RETURN_IF_ERROR(r.get("train.checkpoint_interval", &t.checkpoint_interval, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("train.checkpoint_dir", &t.checkpoint_dir));
  SPARQ_RETURN_IF_ERROR(r.get("train.keep_checkpoints", &t.keep_checkpoints, {.min = 0}));
  if (t.checkpoint_interval > 0 && t.checkpoint_dir.empty()) {
    return Status::error(
        "{}: train.checkpoint_interval: {} needs train.checkpoint_dir (where "
        "the checkpoints go); without one no checkpoint is written",
        r.where(), t.checkpoint_interval);
  }
  std::int64_t seed = static_cast<std::int64_t>(t.seed);
  SPARQ_RETURN_IF_ERROR(r.get("train.seed", &seed, {.min = 0}));
  t.seed = static_cast<std::uint64_t>(seed);
  SPARQ_RETURN_IF_ERROR(
      r.get("train.max_nonfinite_in_a_row", &t.max_nonfinite_in_a_row, {.min = 1}));
  SPARQ_RETURN_IF_ERROR(r.get("train.threads", &t.threads, {.min = 0, .max = 1024}));
  SPARQ_RETURN_IF_ERROR(r.get("train.init_from", &t.init_from));
  SPARQ_RETURN_IF_ERROR(
      r.get_choice("train.init_format", &t.init_format, {"auto", "sparq", "gpt2_hf"}));
  std::string device = "cpu";
  SPARQ_RETURN_IF_ERROR(r.get_choice("train.device", &device, {"cpu", "cuda"}));
  t.device = device == "cuda" ? Device::kCUDA : Device::kCPU;
  SPARQ_RETURN_IF_ERROR(r.get_choice("train.precision", &t.precision, {"fp32", "bf16"}));
  // Note [bf16 GEMM operands] (core/cuda/mixed_gemm.h): bf16 exists on the GPU only.
  if (t.precision == "bf16" && t.device != Device::kCUDA) {
    return Status::error(
        "{}: train.precision: bf16 needs train.device: cuda (the CPU "
        "multiplies in fp32); use precision fp32 on the CPU",
        r.where());
  }
  return Status::ok();
}

Status read_log(YamlReader& r, TrainConfig& c) {
  LogConfig& l = c.log;
  SPARQ_RETURN_IF_ERROR(r.get("log.metrics", &l.metrics_path));
  SPARQ_RETURN_IF_ERROR(r.get("log.progress_interval", &l.progress_interval, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("log.per_rank_timing", &l.per_rank_timing));
  SPARQ_RETURN_IF_ERROR(r.get("log.trace", &l.trace_path));
  // Bounded so that trace_start + trace_steps cannot overflow (review, 2026-12-05).
  SPARQ_RETURN_IF_ERROR(r.get("log.trace_start", &l.trace_start, {.min = 0, .max = 1LL << 50}));
  SPARQ_RETURN_IF_ERROR(r.get("log.trace_steps", &l.trace_steps, {.min = 0, .max = 1LL << 50}));
  if (!l.trace_path.empty() && l.trace_steps == 0) l.trace_steps = 3;
  if (!l.trace_path.empty() && l.trace_start + l.trace_steps > c.train.steps) {
    return Status::error(
        "{}: log.trace: the traced steps {}..{} (log.trace_start + 1 .. + "
        "log.trace_steps) end after train.steps {}, so the trace would never "
        "be written",
        r.where(), l.trace_start + 1, l.trace_start + l.trace_steps, c.train.steps);
  }
  SPARQ_RETURN_IF_ERROR(
      r.get("log.never_sent_window", &l.never_sent_window, {.min = 0, .max = 1000000000}));
  const bool compressed = c.compress.compress.name != "none";
  if (l.never_sent_window > 0 && compressed && !c.compress.error_feedback) {
    return Status::error(
        "{}: log.never_sent_window: needs compress.error_feedback: true (what "
        "was sent is observed where error feedback encodes)",
        r.where());
  }
  return Status::ok();
}

}  // namespace sparq::train::config_sections
