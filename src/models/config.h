// Model configurations: the named size presets and the config keys that override them.
//
// A model spec is a preset name followed by key=value overrides, separated by spaces:
//   "gpt2-124M"   "gpt2-tiny n_layer=2 vocab_size=50257"   "vgg16 num_classes=100"
// The trainer's YAML maps onto the same keys (set_model_key). Every failure (unknown
// preset, unknown key, a key of another architecture, a malformed or out-of-range value,
// n_embd not divisible by n_head, ...) is a Status that names the offending input.
//
// Keys, by architecture (defaults come from the preset):
//   GPT-2 and BERT: n_layer, n_head, n_embd, n_ctx (maximum positions), vocab_size,
//                   vocab_pad (the table is padded to a multiple of it; GPT-2 64, BERT 1),
//                   ffn_dim (BERT only; GPT-2's MLP is always 4 * n_embd), dropout
//                   (embeddings and residual branches), attn_dropout, ln_eps, init_std,
//                   type_vocab_size and nsp (BERT only: token-type rows; pooler + NSP head),
//                   fused_head (1: the fused CPU head, no logits kept; 0: materialized logits)
//   VGG:            layout (comma list of conv widths and M for a 2x2 max-pool),
//                   num_classes, image_size, in_channels, bn_eps, bn_momentum
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace sparq {

enum class ModelArch { kGpt2, kBert, kVgg };
std::string_view model_arch_name(ModelArch arch);

struct ModelConfig {
  ModelArch arch = ModelArch::kGpt2;
  std::string preset;  // the preset this config started from
  std::string spec;    // preset plus the overrides applied, for logs

  // Transformers (GPT-2, BERT).
  std::int64_t n_layer = 0, n_head = 0, n_embd = 0;
  std::int64_t n_ctx = 0;       // learned position rows = longest sequence
  std::int64_t vocab_size = 0;  // real tokens; ids and targets lie in [0, vocab_size)
  std::int64_t vocab_pad = 1;
  std::int64_t ffn_dim = 0;
  std::int64_t type_vocab_size = 0;
  float dropout = 0.0f, attn_dropout = 0.0f;
  float ln_eps = 1e-5f;
  float init_std = 0.02f;
  bool nsp = false;
  // CPU: the tied head and its cross-entropy run fused (layers/tied_head_loss.h) and the
  // logits are never materialized; 0 keeps the separate layers and Model::logits().
  bool fused_head = true;

  // VGG: conv widths in order, kPool marking a 2x2 max-pool.
  static constexpr std::int64_t kPool = 0;
  // Upper bounds of validate_model_config: sizes and widths (n_layer, n_embd, ffn_dim, n_ctx,
  // vocab_pad, conv widths, classes, channels) and VGG's image side. Products of a few of
  // them stay far inside int64, whatever the combination.
  static constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;
  static constexpr std::int64_t kMaxImageSize = std::int64_t{1} << 14;
  std::vector<std::int64_t> layout;
  std::int64_t num_classes = 10, image_size = 32, in_channels = 3;
  float bn_eps = 1e-5f, bn_momentum = 0.1f;

  // Rows of the embedding table and columns of the logits: vocab_size rounded up to vocab_pad.
  std::int64_t padded_vocab() const { return (vocab_size + vocab_pad - 1) / vocab_pad * vocab_pad; }
  std::int64_t head_dim() const { return n_embd / n_head; }
  bool is_language_model() const { return arch != ModelArch::kVgg; }
};

std::vector<std::string> model_preset_names();
Result<ModelConfig> model_preset(std::string_view name);
// Applies one override; the value is parsed for the key's type.
Status set_model_key(ModelConfig& config, std::string_view key, std::string_view value);
// Checks every field and the relations between them (heads divide n_embd, ...).
Status validate_model_config(const ModelConfig& config);

// Whether attention dropout's draws per step (layers/dropout_mask.h: 2^40 per layer) hold a
// micro-batch of `micro_batch` sequences of `seq_len`; else an error naming attn_dropout,
// micro_batch and seq_len. make_model checks it (the attention layer aborted the process:
// review, 2026-12-07), and so does the train config, since a dry run builds its model for
// one row.
Status check_attention_dropout_draws(const ModelConfig& config, std::int64_t micro_batch,
                                     std::int64_t seq_len);

// Preset + overrides, validated.
Result<ModelConfig> make_model_config(
    std::string_view preset, const std::vector<std::pair<std::string, std::string>>& overrides);
// "preset key=value ...", validated.
Result<ModelConfig> parse_model_spec(std::string_view spec);
// The names of the fields (arch, preset, n_layer, ..., layout) where a and b differ; spec is
// not compared.
std::vector<std::string> differing_model_fields(const ModelConfig& a, const ModelConfig& b);

// "64,64,M,128" <-> layout.
Result<std::vector<std::int64_t>> parse_vgg_layout(std::string_view text);
std::string vgg_layout_str(const std::vector<std::int64_t>& layout);

}  // namespace sparq
