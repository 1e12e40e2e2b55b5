#include "train/hf_gpt2.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "train/safetensors.h"

namespace sparq::train {
namespace {

// One Hugging Face tensor feeding one sparq parameter.
struct HfMapping {
  std::string hf;  // without the "transformer." prefix
  std::string sparq;
  bool transpose = false;  // Conv1D [in, out] -> Linear [out, in]
};

std::vector<HfMapping> gpt2_hf_mappings(std::int64_t n_layer) {
  std::vector<HfMapping> m = {{"wte.weight", "wte.weight"}, {"wpe.weight", "wpe.weight"}};
  for (std::int64_t l = 0; l < n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      m.push_back({h + ln + ".weight", h + ln + ".weight"});
      m.push_back({h + ln + ".bias", h + ln + ".bias"});
    }
    const std::pair<const char*, const char*> linears[] = {{"attn.c_attn", "attn.qkv"},
                                                           {"attn.c_proj", "attn.proj"},
                                                           {"mlp.c_fc", "mlp.fc"},
                                                           {"mlp.c_proj", "mlp.proj"}};
    for (const auto& [hf, sp] : linears) {
      m.push_back({h + hf + ".weight", h + sp + ".weight", true});
      m.push_back({h + hf + ".bias", h + sp + ".bias"});
    }
  }
  m.push_back({"ln_f.weight", "ln_f.weight"});
  m.push_back({"ln_f.bias", "ln_f.bias"});
  return m;
}

// HF tensors that are not parameters: the tied head and the attention mask buffers.
bool is_skipped_hf_tensor(std::string_view name) {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") ||
         name.ends_with(".attn.masked_bias");
}

// GPT-2 ties its output head to wte, and sparq's GPT-2 has no head of its own: a file whose
// lm_head.weight differs from wte (a model fine-tuned with tie_word_embeddings=False) would
// silently lose its head, so it is refused. Compared as f32 bits, after each tensor's own
// conversion; with only the header (check_only), the shapes and dtypes alone.
Status check_head_is_tied(const SafetensorsFile& file, const SafetensorsEntry& head,
                          const SafetensorsEntry& wte, const std::string& path, bool check_only) {
  if (head.shape != wte.shape || !convertible_to_f32(head.dtype)) {
    return Status::error(
        "import_gpt2_hf '{}': lm_head.weight is {} {} but wte.weight {} {}: an output head not "
        "tied to the embedding, which sparq's GPT-2 cannot hold",
        path, head.dtype, dims_str(head.shape), wte.dtype, dims_str(wte.shape));
  }
  if (check_only) return Status::ok();
  std::vector<float> head_values(static_cast<std::size_t>(head.numel()));
  std::vector<float> wte_values(static_cast<std::size_t>(wte.numel()));
  SPARQ_RETURN_IF_ERROR(file.read_f32(head, head_values));
  SPARQ_RETURN_IF_ERROR(file.read_f32(wte, wte_values));
  if (std::memcmp(head_values.data(), wte_values.data(), head_values.size() * sizeof(float)) != 0) {
    return Status::error(
        "import_gpt2_hf '{}': lm_head.weight differs from wte.weight: an output head not tied "
        "to the embedding (tie_word_embeddings=False), which sparq's GPT-2 cannot hold; "
        "importing it would replace the head with the embedding",
        path);
  }
  return Status::ok();
}

}  // namespace

Status import_gpt2_hf(ParamStore& store, const std::string& path, std::int64_t vocab_size,
                      bool check_only) {
  if (!check_only) SPARQ_RETURN_IF_ERROR(check_cpu_store(store, "import_gpt2_hf"));
  if (!store.contains("wte.weight") || !store.contains("wpe.weight")) {
    return Status::error("import_gpt2_hf '{}': the model is not GPT-2 (no wte/wpe)", path);
  }
  SPARQ_ASSIGN_OR_RETURN(const SafetensorsFile file, check_only ? SafetensorsFile::read_header(path)
                                                                : SafetensorsFile::read(path));
  const Shape wte_shape = store.entry("wte.weight").spec.shape;
  const std::int64_t rows = wte_shape[0], n_embd = wte_shape[1];
  const std::int64_t n_ctx = store.entry("wpe.weight").spec.shape[0];
  std::int64_t n_layer = 0;
  while (store.contains("h." + std::to_string(n_layer) + ".ln_1.weight")) ++n_layer;

  // HF name without prefix -> entry; both spellings of one tensor would be ambiguous.
  std::map<std::string, const SafetensorsEntry*, std::less<>> by_name;
  for (const auto& t : file.tensors()) {
    std::string name = t.name;
    if (name.starts_with("transformer.")) name.erase(0, std::string_view("transformer.").size());
    if (!by_name.emplace(name, &t).second) {
      return Status::error(
          "import_gpt2_hf '{}': tensor '{}' appears with and without the "
          "'transformer.' prefix",
          path, name);
    }
  }
  const std::string dims = fmt::format("(model: n_layer {}, n_embd {}, n_ctx {}, {} vocab rows)",
                                       n_layer, n_embd, n_ctx, rows);
  const std::vector<HfMapping> mappings = gpt2_hf_mappings(n_layer);
  std::set<std::string> used;
  for (const HfMapping& m : mappings) {
    if (!store.contains(m.sparq)) {
      return Status::error("import_gpt2_hf '{}': the model has no parameter '{}' {}", path, m.sparq,
                           dims);
    }
    const auto it = by_name.find(m.hf);
    if (it == by_name.end()) {
      return Status::error("import_gpt2_hf '{}': missing tensor '{}' (for sparq '{}') {}", path,
                           m.hf, m.sparq, dims);
    }
    const SafetensorsEntry& t = *it->second;
    std::vector<std::int64_t> want = dims_of(store.entry(m.sparq).spec.shape);
    if (m.transpose) std::swap(want[0], want[1]);
    bool ok = t.shape == want;
    std::string want_str = dims_str(want);
    if (m.sparq == "wte.weight") {  // the real vocabulary: any size up to the padded rows
      ok = t.shape.size() == 2 && t.shape[1] == n_embd && t.shape[0] <= rows &&
           (vocab_size <= 0 || t.shape[0] == vocab_size);
      want_str = vocab_size > 0 ? fmt::format("[{}, {}]", vocab_size, n_embd)
                                : fmt::format("[at most {}, {}]", rows, n_embd);
    }
    if (!ok) {
      return Status::error("import_gpt2_hf '{}': tensor '{}' has shape {}, expected {} {}", path,
                           t.name, dims_str(t.shape), want_str, dims);
    }
    if (!convertible_to_f32(t.dtype)) {
      return Status::error("import_gpt2_hf '{}': tensor '{}' has dtype {}, not a float type", path,
                           t.name, t.dtype);
    }
    used.insert(m.hf);
  }
  for (const auto& [name, t] : by_name) {
    if (!used.count(name) && !is_skipped_hf_tensor(name)) {
      return Status::error("import_gpt2_hf '{}': unexpected tensor '{}' {}", path, t->name, dims);
    }
  }
  if (const auto head = by_name.find("lm_head.weight"); head != by_name.end()) {
    SPARQ_RETURN_IF_ERROR(check_head_is_tied(
        file, *head->second, *by_name.find("wte.weight")->second, path, check_only));
  }
  if (used.size() != store.entries().size()) {
    return Status::error("import_gpt2_hf '{}': the model has {} parameters, GPT-2 maps {}", path,
                         store.entries().size(), used.size());
  }
  if (check_only) return Status::ok();
  for (const HfMapping& m : mappings) {
    SPARQ_RETURN_IF_ERROR(file.check_finite(*by_name.find(m.hf)->second));
  }

  std::vector<float> tmp;
  for (const HfMapping& m : mappings) {
    const SafetensorsEntry& t = *by_name.find(m.hf)->second;
    const ParamEntry& p = store.entry(m.sparq);
    float* dst = store.params() + p.offset;
    tmp.resize(static_cast<std::size_t>(t.numel()));
    SPARQ_RETURN_IF_ERROR(file.read_f32(t, tmp));
    if (m.transpose) {  // HF [in, out] -> sparq [out, in]
      const std::int64_t in = t.shape[0], out = t.shape[1];
      for (std::int64_t o = 0; o < out; ++o) {
        for (std::int64_t i = 0; i < in; ++i) dst[o * in + i] = tmp[i * out + o];
      }
    } else {
      std::copy(tmp.begin(), tmp.end(), dst);
      // wte: the padding rows past the real vocabulary are never predicted; keep them zero.
      std::fill(dst + tmp.size(), dst + p.numel, 0.0f);
    }
  }
  return Status::ok();
}

}  // namespace sparq::train
