#include "models/config.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "core/bool_words.h"
#include "core/decimal_text.h"
#include "layers/dropout_mask.h"
#include "models/model_registry.h"

namespace sparq {

std::string_view model_arch_name(ModelArch arch) {
  switch (arch) {
    case ModelArch::kGpt2: return "gpt2";
    case ModelArch::kBert: return "bert";
    case ModelArch::kVgg: return "vgg";
  }
  return "?";
}

namespace {

ModelConfig gpt2(std::int64_t layers, std::int64_t heads, std::int64_t dim, std::int64_t ctx,
                 std::int64_t vocab) {
  ModelConfig c;
  c.arch = ModelArch::kGpt2;
  c.n_layer = layers, c.n_head = heads, c.n_embd = dim, c.n_ctx = ctx, c.vocab_size = vocab;
  c.vocab_pad = 64;  // lets the LM-head GEMM use full vector widths (llm.c pads the same way)
  c.ffn_dim = 4 * dim;
  c.ln_eps = 1e-5f;
  return c;
}

ModelConfig bert(std::int64_t layers, std::int64_t heads, std::int64_t dim, std::int64_t ffn,
                 std::int64_t positions, std::int64_t vocab) {
  ModelConfig c;
  c.arch = ModelArch::kBert;
  c.n_layer = layers, c.n_head = heads, c.n_embd = dim, c.ffn_dim = ffn, c.n_ctx = positions;
  c.vocab_size = vocab;
  c.vocab_pad = 1;
  c.type_vocab_size = 2;
  c.dropout = 0.1f, c.attn_dropout = 0.1f;
  c.ln_eps = 1e-12f;
  return c;
}

ModelConfig vgg(const char* layout) {
  ModelConfig c;
  c.arch = ModelArch::kVgg;
  c.layout = parse_vgg_layout(layout).value();
  return c;
}

// Widths /16 of VGG-16 keep all 13 convs and 5 pools while fitting unit tests.
const std::map<std::string, std::function<ModelConfig()>, std::less<>>& presets() {
  static const std::map<std::string, std::function<ModelConfig()>, std::less<>> table = {
      {"gpt2-124M", [] { return gpt2(12, 12, 768, 1024, 50257); }},
      {"gpt2-350M", [] { return gpt2(24, 16, 1024, 1024, 50257); }},
      {"gpt2-tiny", [] { return gpt2(4, 4, 128, 128, 1024); }},
      {"bert-base", [] { return bert(12, 12, 768, 3072, 512, 30522); }},
      {"bert-large", [] { return bert(24, 16, 1024, 4096, 512, 30522); }},
      {"bert-tiny", [] { return bert(2, 2, 128, 512, 128, 1024); }},
      {"vgg16", [] { return vgg("64,64,M,128,128,M,256,256,256,M,512,512,512,M,512,512,512,M"); }},
      {"vgg11", [] { return vgg("64,M,128,M,256,256,M,512,512,M,512,512,M"); }},
      {"vgg-tiny", [] { return vgg("4,4,M,8,8,M,16,16,16,M,32,32,32,M,32,32,32,M"); }},
  };
  return table;
}

Status parse_int(std::string_view key, std::string_view text, std::int64_t* out) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return Status::error("model key '{}': '{}' is not an integer", key, text);
  }
  *out = v;
  return Status::ok();
}

Status parse_float(std::string_view key, std::string_view text, float* out) {
  // In every locale (Note [Locale-free numbers], core/decimal_text.h), and no leading blanks
  // (the value went into the spec, which is split on blanks, and the spec no longer parsed:
  // "dropout= 0.1", review 2026-12-05) or hexadecimal ("0x0.1", review 2026-12-06).
  const std::optional<float> v = parse_decimal<float>(text);
  if (!v) return Status::error("model key '{}': '{}' is not a finite number", key, text);
  *out = *v;
  return Status::ok();
}

Status parse_bool(std::string_view key, std::string_view text, bool* out) {
  const std::optional<bool> value = parse_bool_word(text);  // Note [Boolean words]
  if (!value) {
    return Status::error("model key '{}': '{}' is not a boolean ({})", key, text, kBoolWords);
  }
  *out = *value;
  return Status::ok();
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : presets()) names.push_back(name);
  return names;
}

Result<ModelConfig> model_preset(std::string_view name) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    // A model registered by an embedding program (model_registry.h) is a preset too.
    if (auto registered = find_registered_model(name); registered.is_ok()) {
      return registered->defaults;
    }
    std::string known;
    for (const auto& n : model_preset_names()) known += (known.empty() ? "" : ", ") + n;
    for (const auto& n : registered_model_names()) known += ", " + n;
    return Status::error("unknown model preset '{}' (known: {})", name, known);
  }
  ModelConfig config = it->second();
  config.preset = std::string(name);
  config.spec = config.preset;
  return config;
}

Status set_model_key(ModelConfig& c, std::string_view key, std::string_view value) {
  const bool lm = c.is_language_model();
  const auto wrong_arch = [&]() {
    return Status::error("model key '{}' does not apply to a {} model", key,
                         model_arch_name(c.arch));
  };
  struct IntKey { const char* name; std::int64_t* field; bool applies; };
  const IntKey ints[] = {
      {"n_layer", &c.n_layer, lm},
      {"n_head", &c.n_head, lm},
      {"n_embd", &c.n_embd, lm},
      {"n_ctx", &c.n_ctx, lm},
      {"vocab_size", &c.vocab_size, lm},
      {"vocab_pad", &c.vocab_pad, lm},
      {"ffn_dim", &c.ffn_dim, c.arch == ModelArch::kBert},
      {"type_vocab_size", &c.type_vocab_size, c.arch == ModelArch::kBert},
      {"num_classes", &c.num_classes, !lm},
      {"image_size", &c.image_size, !lm},
      {"in_channels", &c.in_channels, !lm},
  };
  struct FloatKey { const char* name; float* field; bool applies; };
  const FloatKey floats[] = {
      {"dropout", &c.dropout, lm},     {"attn_dropout", &c.attn_dropout, lm},
      {"ln_eps", &c.ln_eps, lm},       {"init_std", &c.init_std, lm},
      {"bn_eps", &c.bn_eps, !lm},      {"bn_momentum", &c.bn_momentum, !lm},
  };
  bool found = false;
  for (const IntKey& k : ints) {
    if (key != k.name) continue;
    if (!k.applies) return wrong_arch();
    SPARQ_RETURN_IF_ERROR(parse_int(key, value, k.field));
    found = true;
  }
  for (const FloatKey& k : floats) {
    if (key != k.name) continue;
    if (!k.applies) return wrong_arch();
    SPARQ_RETURN_IF_ERROR(parse_float(key, value, k.field));
    found = true;
  }
  if (key == "nsp") {
    if (c.arch != ModelArch::kBert) return wrong_arch();
    SPARQ_RETURN_IF_ERROR(parse_bool(key, value, &c.nsp));
    found = true;
  } else if (key == "fused_head") {
    if (!lm) return wrong_arch();
    SPARQ_RETURN_IF_ERROR(parse_bool(key, value, &c.fused_head));
    found = true;
  } else if (key == "layout") {
    if (lm) return wrong_arch();
    auto layout = parse_vgg_layout(value);
    if (!layout) return layout.status().with_context("model key 'layout'");
    c.layout = std::move(layout).value();
    found = true;
  }
  if (!found) return Status::error("unknown model key '{}'", key);
  // GPT-2's MLP width follows the embedding width, when that is what changed (any key used to
  // reset a registered GPT-2-like model's own ffn_dim), and only for a width validation can
  // accept (4 n_embd overflowed for a huge one before validation saw it).
  if (c.arch == ModelArch::kGpt2 && key == "n_embd" && c.n_embd > 0 &&
      c.n_embd <= ModelConfig::kMaxWidth) {
    c.ffn_dim = 4 * c.n_embd;
  }
  c.spec.append(" ").append(key).append("=").append(value);
  return Status::ok();
}

Status validate_model_config(const ModelConfig& c) {
  const std::string& who = c.spec;
  if (c.is_language_model()) {
    const std::pair<const char*, std::int64_t> positive[] = {
        {"n_layer", c.n_layer}, {"n_head", c.n_head},         {"n_embd", c.n_embd},
        {"n_ctx", c.n_ctx},     {"vocab_size", c.vocab_size}, {"vocab_pad", c.vocab_pad},
        {"ffn_dim", c.ffn_dim}};
    for (const auto& [key, v] : positive) {
      if (v <= 0) return Status::error("{}: {} must be positive, got {}", who, key, v);
    }
    // GPT-2's MLP width is 4 n_embd (set_model_key), which a GPT-2 config cannot set: over
    // the bound, the error named ffn_dim, a key refused for GPT-2 (review, 2026-12-07).
    if (c.arch == ModelArch::kGpt2 && c.n_embd <= ModelConfig::kMaxWidth &&
        c.ffn_dim == 4 * c.n_embd && c.ffn_dim > ModelConfig::kMaxWidth) {
      return Status::error("{}: n_embd {} makes GPT-2's MLP width 4 x {} = {}, over {}", who,
                           c.n_embd, c.n_embd, c.ffn_dim, ModelConfig::kMaxWidth);
    }
    // Upper bounds, so that no product of sizes (tensor numels, activation rows times
    // widths) can overflow int64 (review, 2026-12-05: a huge n_embd wrapped them).
    const std::pair<const char*, std::int64_t> bounded[] = {{"n_layer", c.n_layer},
                                                            {"n_embd", c.n_embd},
                                                            {"ffn_dim", c.ffn_dim},
                                                            {"n_ctx", c.n_ctx},
                                                            {"vocab_pad", c.vocab_pad}};
    for (const auto& [key, v] : bounded) {
      if (v > ModelConfig::kMaxWidth) {
        return Status::error("{}: {} {} exceeds {}", who, key, v, ModelConfig::kMaxWidth);
      }
    }
    if (c.n_embd % c.n_head != 0) {
      return Status::error("{}: n_embd {} is not divisible by n_head {}", who, c.n_embd,
                           c.n_head);
    }
    if (c.vocab_size > (std::int64_t{1} << 31) - 1 - c.vocab_pad) {
      return Status::error("{}: vocab_size {} does not fit int32 token ids", who, c.vocab_size);
    }
    if (c.arch == ModelArch::kBert &&
        (c.type_vocab_size <= 0 || c.type_vocab_size > ModelConfig::kMaxWidth)) {
      return Status::error("{}: type_vocab_size must be in [1, {}], got {}", who,
                           ModelConfig::kMaxWidth, c.type_vocab_size);
    }
    for (const auto& [key, p] : {std::pair{"dropout", c.dropout}, {"attn_dropout", c.attn_dropout}}) {
      if (!(p >= 0.0f && p < 1.0f)) return Status::error("{}: {} must be in [0, 1), got {}", who, key, p);
    }
    if (!(c.ln_eps > 0.0f)) return Status::error("{}: ln_eps must be positive, got {}", who, c.ln_eps);
    if (!(c.init_std > 0.0f)) {
      return Status::error("{}: init_std must be positive, got {}", who, c.init_std);
    }
    return Status::ok();
  }
  if (c.layout.empty()) return Status::error("{}: layout has no layers", who);
  if (c.layout.front() == ModelConfig::kPool) {
    return Status::error("{}: layout must start with a convolution, not M", who);
  }
  // Widths are checked here too, not only by parse_vgg_layout: a registered model's layout
  // reaches this without it.
  for (const std::int64_t item : c.layout) {
    if (item != ModelConfig::kPool && (item <= 0 || item > ModelConfig::kMaxWidth)) {
      return Status::error("{}: layout width {} is not in [1, {}]", who, item,
                           ModelConfig::kMaxWidth);
    }
  }
  if (c.num_classes <= 1 || c.num_classes > ModelConfig::kMaxWidth) {
    return Status::error("{}: num_classes must be in [2, {}], got {}", who, ModelConfig::kMaxWidth,
                         c.num_classes);
  }
  if (c.in_channels <= 0 || c.in_channels > ModelConfig::kMaxWidth) {
    return Status::error("{}: in_channels must be in [1, {}], got {}", who, ModelConfig::kMaxWidth,
                         c.in_channels);
  }
  std::int64_t size = c.image_size;
  // Pooling indexes a plane with int32 (layers/pooling.cpp): 2^14 x 2^14 fits.
  if (size <= 0 || size > ModelConfig::kMaxImageSize) {
    return Status::error("{}: image_size must be in [1, {}], got {}", who,
                         ModelConfig::kMaxImageSize, size);
  }
  for (const std::int64_t item : c.layout) {
    if (item != ModelConfig::kPool) continue;
    if (size % 2 != 0) {
      return Status::error("{}: image_size {} cannot be halved by every M of layout {}", who,
                           c.image_size, vgg_layout_str(c.layout));
    }
    size /= 2;
  }
  if (!(c.bn_eps > 0.0f)) return Status::error("{}: bn_eps must be positive, got {}", who, c.bn_eps);
  if (!(c.bn_momentum > 0.0f && c.bn_momentum <= 1.0f)) {
    return Status::error("{}: bn_momentum must be in (0, 1], got {}", who, c.bn_momentum);
  }
  return Status::ok();
}

Result<ModelConfig> make_model_config(
    std::string_view preset, const std::vector<std::pair<std::string, std::string>>& overrides) {
  SPARQ_ASSIGN_OR_RETURN(ModelConfig config, model_preset(preset));
  for (const auto& [key, value] : overrides) {
    SPARQ_RETURN_IF_ERROR(set_model_key(config, key, value).with_context(config.preset));
  }
  SPARQ_RETURN_IF_ERROR(validate_model_config(config));
  return config;
}

Result<ModelConfig> parse_model_spec(std::string_view spec) {
  std::istringstream words{std::string(spec)};
  std::string preset, word;
  if (!(words >> preset)) return Status::error("empty model spec");
  std::vector<std::pair<std::string, std::string>> overrides;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::error("model spec '{}': '{}' is not key=value", spec, word);
    }
    overrides.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  }
  return make_model_config(preset, overrides);
}

std::vector<std::string> differing_model_fields(const ModelConfig& a, const ModelConfig& b) {
  std::vector<std::string> names;
  const auto check = [&](const char* name, const auto& x, const auto& y) {
    if (!(x == y)) names.emplace_back(name);
  };
  check("arch", a.arch, b.arch);
  check("preset", a.preset, b.preset);
  check("n_layer", a.n_layer, b.n_layer);
  check("n_head", a.n_head, b.n_head);
  check("n_embd", a.n_embd, b.n_embd);
  check("n_ctx", a.n_ctx, b.n_ctx);
  check("vocab_size", a.vocab_size, b.vocab_size);
  check("vocab_pad", a.vocab_pad, b.vocab_pad);
  check("ffn_dim", a.ffn_dim, b.ffn_dim);
  check("type_vocab_size", a.type_vocab_size, b.type_vocab_size);
  check("dropout", a.dropout, b.dropout);
  check("attn_dropout", a.attn_dropout, b.attn_dropout);
  check("ln_eps", a.ln_eps, b.ln_eps);
  check("init_std", a.init_std, b.init_std);
  check("nsp", a.nsp, b.nsp);
  check("fused_head", a.fused_head, b.fused_head);
  check("layout", a.layout, b.layout);
  check("num_classes", a.num_classes, b.num_classes);
  check("image_size", a.image_size, b.image_size);
  check("in_channels", a.in_channels, b.in_channels);
  check("bn_eps", a.bn_eps, b.bn_eps);
  check("bn_momentum", a.bn_momentum, b.bn_momentum);
  return names;
}

Result<std::vector<std::int64_t>> parse_vgg_layout(std::string_view text) {
  std::vector<std::int64_t> layout;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    if (item == "M" || item == "m") {
      layout.push_back(ModelConfig::kPool);
    } else {
      std::int64_t width = 0;
      const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), width);
      if (ec != std::errc() || ptr != item.data() + item.size() || width <= 0) {
        return Status::error("layout '{}': item '{}' is neither a positive width nor M", text,
                             item);
      }
      layout.push_back(width);
    }
    start = comma + 1;
  }
  return layout;
}

std::string vgg_layout_str(const std::vector<std::int64_t>& layout) {
  std::string out;
  for (const std::int64_t item : layout) {
    if (!out.empty()) out += ',';
    out += item == ModelConfig::kPool ? std::string("M") : std::to_string(item);
  }
  return out;
}

Status check_attention_dropout_draws(const ModelConfig& config, std::int64_t micro_batch,
                                     std::int64_t seq_len) {
  if (!config.is_language_model() || config.attn_dropout == 0.0f) return Status::ok();
  const double scores = static_cast<double>(micro_batch) * static_cast<double>(config.n_head) *
                        static_cast<double>(seq_len) * static_cast<double>(seq_len);
  if (scores < std::ldexp(1.0, DropoutKey::kStepShift)) return Status::ok();
  return Status::error(
      "{}: attn_dropout {} over micro_batch {} x n_head {} x seq_len {}^2 attention scores "
      "passes the 2^{} dropout draws a step holds: set attn_dropout=0, or lower micro_batch "
      "or seq_len",
      config.spec, config.attn_dropout, micro_batch, config.n_head, seq_len,
      DropoutKey::kStepShift);
}

}  // namespace sparq
