#include "train/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <set>
#include <string_view>

#include "optim/unread_setting.h"
#include "train/config_sections.h"
#include "train/yaml_reader.h"

namespace sparq::train {

Result<TrainConfig> parse_train_config(const std::string& yaml_text, const std::string& origin,
                                       const std::vector<std::string>& overrides,
                                       std::vector<std::string>* keys_read) {
  SPARQ_ASSIGN_OR_RETURN(YamlReader reader, YamlReader::from_string(yaml_text, origin));
  for (const std::string& o : overrides) SPARQ_RETURN_IF_ERROR(reader.set_override(o));
  TrainConfig c;
  c.origin = origin;
  c.origin_with_overrides = reader.where();
  // train first: the LR schedule's total_steps comes from train.steps. Each reader reads its
  // own top-level section only.
  using SectionReader = Status (*)(YamlReader&, TrainConfig&);
  static constexpr std::array<std::pair<std::string_view, SectionReader>, 7> kSections = {{
      {"train", config_sections::read_loop},
      {"model", config_sections::read_model},
      {"data", config_sections::read_data},
      {"optim", config_sections::read_optim},
      {"compress", config_sections::read_compress},
      {"comm", config_sections::read_comm},
      {"log", config_sections::read_log},
  }};
  std::set<std::string_view> read_in_full;
  for (const auto& [section, read] : kSections) {
    const Status s = read(reader, c);
    if (s.is_ok()) {
      read_in_full.insert(section);
      continue;
    }
    // Keys are known only once read, so unknown keys are listed after every section; when a
    // section fails first, those of the sections read so far and of names that are no
    // section are said beside its error: a misspelt key (optimm.lr, or train.stpes when a
    // later section fails) is often what the error is about (review, 2026-12-05). The
    // failing section's own keys are not listed: its reader stopped before reaching them
    // all, so an unread key there is not known to be unknown.
    std::vector<std::string> unknown;
    for (const std::string& key : reader.unknown_keys()) {
      const std::string_view top = std::string_view(key).substr(0, key.find('.'));
      const bool a_section = std::any_of(kSections.begin(), kSections.end(),
                                         [&](const auto& entry) { return entry.first == top; });
      if (!a_section || read_in_full.count(top)) unknown.push_back(key);
    }
    if (unknown.empty()) return s;
    return Status::error("{} (also unknown key{} {}: a misspelt key may be the cause)", s.message(),
                         unknown.size() > 1 ? "s" : "", fmt::join(unknown, ", "));
  }
  SPARQ_RETURN_IF_ERROR(reader.check_no_unknown_keys());
  if (keys_read) *keys_read = reader.keys_read();
  c.resolved_yaml = effective_yaml(c);
  return c;
}

std::vector<std::string> unread_settings(const TrainConfig& c) {
  const TrainConfig defaults;
  const DataConfig& d = c.data;
  const DataConfig& dd = defaults.data;
  const bool bert = c.model.arch == ModelArch::kBert;
  const bool images = d.source == "cifar10" || d.source == "synthetic_images";
  const bool markov = d.source == "markov";
  const std::string data_run = fmt::format("model {}, data.source {}", c.model.preset, d.source);
  std::vector<std::string> notes = optim::unread_notes(
      {
          {"mask_prob", d.mask_prob != dd.mask_prob, bert, "BERT reads it"},
          {"cls_id", d.cls_id != dd.cls_id, bert, "BERT reads it"},
          {"sep_id", d.sep_id != dd.sep_id, bert, "BERT reads it"},
          {"mask_id", d.mask_id != dd.mask_id, bert, "BERT reads it"},
          {"pad_id", d.pad_id != dd.pad_id, bert, "BERT reads it"},
          {"augment", d.augment != dd.augment, images, "the image sources read it"},
          {"synthetic.train_images", d.synthetic_train_images != dd.synthetic_train_images,
           d.source == "synthetic_images", "data.source synthetic_images reads it"},
          {"synthetic.eval_images", d.synthetic_eval_images != dd.synthetic_eval_images,
           d.source == "synthetic_images", "data.source synthetic_images reads it"},
          // The Markov keys for another source, seq_len for images (review, 2026-12-07).
          {"seq_len", d.seq_len != dd.seq_len, !images, "the token sources read it"},
          {"markov.vocab_size", d.markov.vocab_size != dd.markov.vocab_size, markov,
           "data.source markov reads it"},
          {"markov.order", d.markov.order != dd.markov.order, markov,
           "data.source markov reads it"},
          {"markov.branching", d.markov.branching != dd.markov.branching, markov,
           "data.source markov reads it"},
          {"markov.smoothing", d.markov.smoothing != dd.markov.smoothing, markov,
           "data.source markov reads it"},
          {"markov.seed", d.markov.seed != dd.markov.seed, markov, "data.source markov reads it"},
          {"markov.train_tokens", d.markov_train_tokens != dd.markov_train_tokens, markov,
           "data.source markov reads it"},
          {"markov.eval_tokens", d.markov_eval_tokens != dd.markov_eval_tokens, markov,
           "data.source markov reads it"},
      },
      "data.", data_run);
  const auto append = [&notes](std::vector<std::string> more) {
    notes.insert(notes.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  };
  const LoopConfig& t = c.train;
  const LoopConfig& td = defaults.train;
  const bool saving = !t.checkpoint_dir.empty();
  append(optim::unread_notes(
      {
          {"keep_checkpoints", t.keep_checkpoints != td.keep_checkpoints, saving,
           "a run with train.checkpoint_dir reads it"},
      },
      "train.", "no train.checkpoint_dir"));
  append(optim::unread_notes({{"init_format", t.init_format != td.init_format, !t.init_from.empty(),
                               "a run with train.init_from reads it"}},
                             "train.", "no train.init_from"));
  const bool tracing = !c.log.trace_path.empty();
  append(optim::unread_notes(
      {
          {"trace_start", c.log.trace_start != defaults.log.trace_start, tracing,
           "a run with log.trace reads it"},
          {"trace_steps", c.log.trace_steps != defaults.log.trace_steps, tracing,
           "a run with log.trace reads it"},
      },
      "log.", "no log.trace"));
  const bool auto_plan = c.comm.plan_mode == "auto";
  append(optim::unread_notes(
      {
          {"plan_profile", c.comm.plan_profile != defaults.comm.plan_profile, auto_plan,
           "comm.plan: auto reads it"},
          {"plan_network", c.comm.plan_network != defaults.comm.plan_network, auto_plan,
           "comm.plan: auto reads it"},
          {"plan_min_compression",
           c.comm.plan_min_compression != defaults.comm.plan_min_compression, auto_plan,
           "comm.plan: auto reads it"},
      },
      "comm.", "comm.plan: " + c.comm.plan_mode));
  // Per-layer buckets have no first cap (bucket_plan.cpp): it was ignored without a word
  // (review, 2026-12-07).
  append(optim::unread_notes(
      {{"first_bucket_mb", c.comm.plan.first_bucket_mb != defaults.comm.plan.first_bucket_mb,
        c.comm.plan.bucket_mb > 0, "buckets capped by size read it"}},
      "comm.", "comm.bucket_mb: 0 (one bucket per layer)"));
  return notes;
}

bool clips_locally(const TrainConfig& c) {
  return c.clip_scope == "local" || (c.clip_scope == "auto" && c.optim.communicate != "gradient");
}

bool holds_buckets_for_local_norm(const TrainConfig& c) {
  return clips_locally(c) && (c.clip_norm > 0 || c.train.device != Device::kCPU);
}

Result<TrainConfig> load_train_config(const std::string& path,
                                      const std::vector<std::string>& overrides) {
  SPARQ_ASSIGN_OR_RETURN(YamlReader reader, YamlReader::from_file(path));
  return parse_train_config(reader.dump(), path, overrides);
}

}  // namespace sparq::train
