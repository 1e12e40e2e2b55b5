// Safetensors export and import: a bit-exact round trip, files written by Python (f32, f16,
// bf16), HF GPT-2 checkpoints landing in place and matching torch's logits, and import errors
// that name the tensor. Damaged files: safetensors_damage_test.cpp.
#include "train/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "core/file_io.h"
#include "models/model_test_util.h"
#include "safetensors_test_util.h"
#include "train/hf_gpt2.h"

namespace sparq::train {
namespace {

const std::string kRef = std::string(SPARQ_SOURCE_DIR) + "/tests/reference/safetensors/";

using testing_safetensors::contains;
using testing_safetensors::kHfSpec;
using testing_safetensors::temp;

// Rewrites every tensor of `in` (as F32) to `out`, letting `edit` rename (return false to
// drop) each one or change its shape.
using Edit = std::function<bool(std::string& name, std::vector<std::int64_t>& shape)>;
void rewrite(const std::string& in, const std::string& out, const Edit& edit) {
  auto file = SafetensorsFile::read(in);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  std::vector<std::vector<float>> values;
  std::vector<SafetensorsTensor> tensors;
  values.reserve(file->tensors().size());
  for (const SafetensorsEntry& e : file->tensors()) {
    std::string name = e.name;
    std::vector<std::int64_t> shape = e.shape;
    if (!edit(name, shape)) continue;
    values.push_back(*file->read_f32(e.name));
    tensors.push_back({name, shape, values.back()});
  }
  ASSERT_TRUE(write_safetensors(out, tensors, file->metadata()).is_ok());
}

// gen_safetensors.py's hf_value: element i of the HF tensor `name` (no "transformer.").
float hf_value(const std::string& name, std::int64_t i) {
  int k = 0;
  for (const unsigned char c : name) k += c;
  k %= 29;
  const bool ln_weight = name.find("ln_") != std::string::npos && name.ends_with(".weight");
  return static_cast<float>((ln_weight ? 1.0 : 0.0) + ((7 * i + 13 * k) % 29 - 14) / 256.0);
}

TEST(Safetensors, ExportImportRoundTripIsBitExact) {
  ParamStore a, b;
  testing::bound_model("gpt2-tiny", {1, 8}, a, /*seed=*/1);
  testing::bound_model("gpt2-tiny", {1, 8}, b, /*seed=*/2);
  const std::string path = temp("roundtrip.safetensors");
  ASSERT_TRUE(export_safetensors(a, path, {{"spec", "gpt2-tiny"}}).is_ok());
  ASSERT_NE(std::memcmp(a.params(), b.params(), a.flat_numel() * 4), 0);
  const Status s = import_safetensors(b, path);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(std::memcmp(a.params(), b.params(), a.flat_numel() * 4), 0);

  auto file = SafetensorsFile::read(path);
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ(file->metadata().at("spec"), "gpt2-tiny");
  ASSERT_EQ(file->tensors().size(), a.entries().size());
  const SafetensorsEntry* qkv = file->find("h.1.attn.qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<std::int64_t>{384, 128}));
  EXPECT_EQ(qkv->dtype, "F32");
  // The reference implementation pads the header so the data is 8-byte aligned.
  EXPECT_EQ(file->tensors().front().begin, 0u);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, read_file(path)->data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

TEST(Safetensors, ReadsPythonWrittenF32F16Bf16) {
  auto file = SafetensorsFile::read(kRef + "dtypes.safetensors");
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ(*file->read_f32("f32"),
            (std::vector<float>{0.5f, -1.25f, 3.0f, 0.001f, -0.0f, 65504.0f}));
  EXPECT_EQ(*file->read_f32("f16"), (std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -14),
                                                        65504.0f, std::ldexp(1.0f, -24)}));
  EXPECT_EQ(*file->read_f32("bf16"),
            (std::vector<float>{1.0f, -3.140625f, std::ldexp(1.0f, 100), -std::ldexp(1.0f, -100)}));
  EXPECT_EQ(*file->read_f32("scalar"), std::vector<float>{7.0f});
  EXPECT_TRUE(file->read_f32("empty")->empty());
  EXPECT_EQ(file->find("f16")->shape, std::vector<std::int64_t>{5});
  EXPECT_TRUE(file->find("scalar")->shape.empty());
  EXPECT_EQ(file->find("bf16")->dtype, "BF16");
  EXPECT_EQ(file->metadata().at("format"), "pt");
  // JSON escapes: \", \\, \u0301, \u2603 and the surrogate pair \ud83d\ude00.
  EXPECT_EQ(file->metadata().at("note"),
            "quote \" backslash \\ e\xcc\x81 \xe2\x98\x83 \xf0\x9f\x98\x80");
  EXPECT_FALSE(file->read_f32("absent").is_ok());
}

TEST(Safetensors, HfGpt2ImportLandsEveryValueInPlace) {
  ParamStore store;
  auto model = testing::bound_model(kHfSpec, {1, 8}, store);
  ASSERT_EQ(store.entry("wte.weight").spec.shape, (Shape{64, 16}));  // 40 rows padded to 64
  const Status s = import_gpt2_hf(store, kRef + "gpt2_hf_tiny.safetensors", 40);
  ASSERT_TRUE(s.is_ok()) << s.message();

  struct Map {
    const char* hf;
    const char* sparq;
    bool transpose;
  };
  std::vector<Map> maps = {{"wte.weight", "wte.weight", false},
                           {"wpe.weight", "wpe.weight", false},
                           {"ln_f.weight", "ln_f.weight", false},
                           {"ln_f.bias", "ln_f.bias", false}};
  std::vector<std::string> names;  // keeps the c_str()s alive
  names.reserve(64);
  for (int l = 0; l < 2; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const std::pair<std::string, std::string> pairs[] = {{"ln_1.weight", "ln_1.weight"},
                                                         {"ln_1.bias", "ln_1.bias"},
                                                         {"ln_2.weight", "ln_2.weight"},
                                                         {"ln_2.bias", "ln_2.bias"},
                                                         {"attn.c_attn.weight", "attn.qkv.weight"},
                                                         {"attn.c_attn.bias", "attn.qkv.bias"},
                                                         {"attn.c_proj.weight", "attn.proj.weight"},
                                                         {"attn.c_proj.bias", "attn.proj.bias"},
                                                         {"mlp.c_fc.weight", "mlp.fc.weight"},
                                                         {"mlp.c_fc.bias", "mlp.fc.bias"},
                                                         {"mlp.c_proj.weight", "mlp.proj.weight"},
                                                         {"mlp.c_proj.bias", "mlp.proj.bias"}};
    for (const auto& [hf, sp] : pairs) {
      names.push_back(h + hf);
      names.push_back(h + sp);
      maps.push_back({names[names.size() - 2].c_str(), names.back().c_str(),
                      sp.ends_with("weight") && !sp.starts_with("ln_")});
    }
  }
  ASSERT_EQ(maps.size(), store.entries().size());
  for (const Map& m : maps) {
    const Tensor p = store.param(m.sparq);
    const float* v = p.data<float>();
    if (m.transpose) {  // sparq [out, in] element (o, i) = HF [in, out] element (i, o)
      const std::int64_t out = p.shape()[0], in = p.shape()[1];
      for (std::int64_t o = 0; o < out; ++o) {
        for (std::int64_t i = 0; i < in; ++i) {
          ASSERT_EQ(v[o * in + i], hf_value(m.hf, i * out + o)) << m.sparq << " " << o << "," << i;
        }
      }
    } else {
      const std::int64_t real = std::string(m.sparq) == "wte.weight" ? 40 * 16 : p.numel();
      for (std::int64_t i = 0; i < p.numel(); ++i) {
        ASSERT_EQ(v[i], i < real ? hf_value(m.hf, i) : 0.0f) << m.sparq << " " << i;
      }
    }
  }
}

TEST(Safetensors, HfGpt2ImportAcceptsNamesWithoutPrefix) {
  const std::string path = temp("hf_noprefix.safetensors");
  rewrite(kRef + "gpt2_hf_tiny.safetensors", path, [](std::string& name, auto&) {
    if (name.starts_with("transformer.")) name.erase(0, 12);
    return true;
  });
  ParamStore a, b;
  testing::bound_model(kHfSpec, {1, 8}, a);
  testing::bound_model(kHfSpec, {1, 8}, b);
  ASSERT_TRUE(import_gpt2_hf(a, kRef + "gpt2_hf_tiny.safetensors").is_ok());
  const Status s = import_gpt2_hf(b, path);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(std::memcmp(a.params(), b.params(), a.flat_numel() * 4), 0);
}

TEST(Safetensors, HfGpt2LogitsMatchTorchForward) {
  ParamStore store;
  // fused_head=0 keeps the logits (the same parameters as kHfSpec).
  auto model = testing::bound_model(std::string(kHfSpec) + " fused_head=0", {1, 8}, store);
  ASSERT_TRUE(import_gpt2_hf(store, kRef + "gpt2_hf_tiny.safetensors").is_ok());
  auto ref = SafetensorsFile::read(kRef + "gpt2_hf_tiny_logits.safetensors");
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  const std::vector<float> tokens = *ref->read_f32("tokens");
  const std::vector<float> logits = *ref->read_f32("logits");
  ASSERT_EQ(tokens.size(), 8u);
  ASSERT_EQ(logits.size(), 8u * 40);

  std::vector<std::int32_t> ids(8), targets(8, 0);
  for (int t = 0; t < 8; ++t) ids[t] = static_cast<std::int32_t>(tokens[t]);
  Batch batch;
  batch.tokens = Tensor(ids.data(), DType::kI32, {1, 8});
  batch.targets = Tensor(targets.data(), DType::kI32, {1, 8});
  model->set_training(false);
  model->forward(batch);
  const float* got = model->logits().data<float>();  // [1, 8, 64]
  double max_err = 0;
  for (int t = 0; t < 8; ++t) {
    for (int v = 0; v < 40; ++v) {
      max_err = std::max(max_err, std::abs(double(got[t * 64 + v]) - logits[t * 40 + v]));
    }
  }
  EXPECT_LT(max_err, 2e-6) << "sparq logits differ from the torch forward of the HF weights: "
                           << max_err;
}

// An HF file whose lm_head.weight is not wte's copy holds an untied head, which sparq's GPT-2
// (head tied to wte) cannot hold: refused, where it was dropped silently (review).
TEST(Safetensors, HfGpt2ImportRefusesAnUntiedHead) {
  auto file = SafetensorsFile::read(kRef + "gpt2_hf_tiny.safetensors");
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  std::vector<std::vector<float>> values;
  std::vector<SafetensorsTensor> tensors;
  values.reserve(file->tensors().size());
  bool has_head = false;
  for (const SafetensorsEntry& e : file->tensors()) {
    values.push_back(*file->read_f32(e.name));
    if (e.name == "lm_head.weight") {
      has_head = true;
      values.back()[5] += 1.0f;  // one value of the head differs
    }
    tensors.push_back({e.name, e.shape, values.back()});
  }
  ASSERT_TRUE(has_head) << "the fixture stores the tied head";
  const std::string untied = temp("hf_untied.safetensors");
  ASSERT_TRUE(write_safetensors(untied, tensors, file->metadata()).is_ok());
  ParamStore store;
  testing::bound_model(kHfSpec, {1, 8}, store);
  const Status s = import_gpt2_hf(store, untied);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s, "lm_head.weight differs from wte.weight") && contains(s, untied))
      << s.message();
  // The fixture itself, whose head is wte's copy, imports.
  ParamStore tied;
  testing::bound_model(kHfSpec, {1, 8}, tied);
  EXPECT_TRUE(import_gpt2_hf(tied, kRef + "gpt2_hf_tiny.safetensors").is_ok());
}

TEST(Safetensors, ImportErrorsNameTheTensor) {
  ParamStore store;
  testing::bound_model("gpt2-tiny", {1, 8}, store);
  const std::string good = temp("good.safetensors");
  ASSERT_TRUE(export_safetensors(store, good).is_ok());

  const std::string missing = temp("missing.safetensors");
  rewrite(good, missing, [](std::string& n, auto&) { return n != "h.2.mlp.fc.bias"; });
  Status s = import_safetensors(store, missing);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s, "h.2.mlp.fc.bias") && contains(s, missing)) << s.message();
  EXPECT_TRUE(import_safetensors(store, missing, {.allow_missing = true}).is_ok());

  const std::string shaped = temp("shape.safetensors");
  rewrite(good, shaped, [](std::string& n, std::vector<std::int64_t>& shape) {
    if (n == "wpe.weight") shape = {64, 256};  // same element count, wrong shape
    return true;
  });
  const std::vector<float> before(store.params(), store.params() + store.flat_numel());
  s = import_safetensors(store, shaped);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(std::memcmp(before.data(), store.params(), before.size() * 4), 0)
      << "a failed import changed the store";
  EXPECT_TRUE(contains(s, "wpe.weight") && contains(s, "[64, 256]") && contains(s, "[128, 128]"))
      << s.message();

  const std::string extra = temp("extra.safetensors");
  rewrite(good, extra, [](std::string& n, auto&) {
    if (n == "ln_f.bias") n = "ln_g.bias";
    return true;
  });
  s = import_safetensors(store, extra, {.allow_missing = true});
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s, "ln_g.bias")) << s.message();

  // HF import into a model of another size: the error names the first tensor that disagrees.
  struct Case {
    const char* overrides;
    std::int64_t vocab_size;
    std::vector<std::string_view> expect;
  };
  const Case cases[] = {
      {"n_layer=2 n_embd=16 n_ctx=16", 0, {"wpe.weight", "n_ctx 16"}},
      {"n_layer=3 n_embd=16 n_ctx=8", 0, {"missing tensor 'h.2.ln_1.weight'"}},
      {"n_layer=1 n_embd=16 n_ctx=8", 0, {"unexpected tensor 'transformer.h.1."}},
      {"n_layer=2 n_embd=32 n_ctx=8", 0, {"wte.weight", "[40, 16]", "n_embd 32"}},
      {"n_layer=2 n_embd=16 n_ctx=8", 50, {"wte.weight", "[50, 16]"}},
  };
  for (const Case& c : cases) {
    ParamStore other;
    testing::bound_model(fmt::format("gpt2-tiny n_head=2 vocab_size=40 {}", c.overrides), {1, 8},
                         other);
    s = import_gpt2_hf(other, kRef + "gpt2_hf_tiny.safetensors", c.vocab_size);
    ASSERT_FALSE(s.is_ok()) << c.overrides;
    for (const std::string_view e : c.expect) EXPECT_TRUE(contains(s, e)) << s.message();
  }
}

// A dry run checks initial weights from the header alone (review, 2026-12-07: a file for
// another model passed the dry run): the same verdicts as a real import, nothing copied.
TEST(Safetensors, CheckOnlyImportValidatesWithoutCopying) {
  ParamStore store;
  testing::bound_model("gpt2-tiny", {1, 8}, store);
  const std::string good = temp("check_good.safetensors");
  ASSERT_TRUE(export_safetensors(store, good).is_ok());
  store.params()[0] += 1.0f;  // the file now differs from the store
  const std::vector<float> before(store.params(), store.params() + store.flat_numel());
  EXPECT_TRUE(import_safetensors(store, good, {.check_only = true}).is_ok());
  EXPECT_EQ(std::memcmp(before.data(), store.params(), before.size() * 4), 0)
      << "a check-only import changed the store";

  const std::string shaped = temp("check_shape.safetensors");
  rewrite(good, shaped, [](std::string& n, std::vector<std::int64_t>& shape) {
    if (n == "wpe.weight") shape = {64, 256};
    return true;
  });
  const Status s = import_safetensors(store, shaped, {.check_only = true});
  EXPECT_TRUE(contains(s, "wpe.weight") && contains(s, "[64, 256]")) << s.message();
  EXPECT_EQ(s.message(), import_safetensors(store, shaped).message());

  // Hugging Face names: a fitting model passes, another size is refused naming the tensor,
  // and the store is untouched either way.
  ParamStore hf_store;
  testing::bound_model(kHfSpec, {1, 8}, hf_store);
  const std::vector<float> hf_before(hf_store.params(), hf_store.params() + hf_store.flat_numel());
  const std::string hf = kRef + "gpt2_hf_tiny.safetensors";
  EXPECT_TRUE(import_gpt2_hf(hf_store, hf, 40, true).is_ok());
  EXPECT_EQ(std::memcmp(hf_before.data(), hf_store.params(), hf_before.size() * 4), 0);
  const Status vocab = import_gpt2_hf(hf_store, hf, 48, true);
  EXPECT_TRUE(contains(vocab, "wte.weight") && contains(vocab, "[48, 16]")) << vocab.message();
  ParamStore wider;
  testing::bound_model("gpt2-tiny n_head=2 vocab_size=40 n_layer=2 n_embd=32 n_ctx=8", {1, 8},
                       wider);
  EXPECT_EQ(import_gpt2_hf(wider, hf, 0, true).message(), import_gpt2_hf(wider, hf).message());
}

}  // namespace
}  // namespace sparq::train
