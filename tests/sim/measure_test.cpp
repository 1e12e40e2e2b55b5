// Measurements that fill a machine profile (sim/measure.h). No timing assertions beyond
// positivity: the figures depend on the machine and its load.
#include <gtest/gtest.h>

#include <filesystem>

#include "models/config.h"
#include "models/model.h"
#include "sim/measure.h"

namespace sparq::sim {
namespace {

TEST(MeasureCompute, OnePositiveTimePerLayerInModelOrder) {
  const std::string spec = "gpt2-tiny vocab_size=256 n_ctx=16 n_layer=2";
  auto measured = measure_compute(spec, 2, 16, 2);
  ASSERT_TRUE(measured.is_ok()) << measured.status().message();
  auto config = parse_model_spec(spec);
  ASSERT_TRUE(config.is_ok());
  auto model = make_model(config.value(), {2, 16});
  ASSERT_TRUE(model.is_ok());
  const auto& layers = model.value()->layers();
  ASSERT_EQ(measured->layers.size(), layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(measured->layers[i].name, layers[i].name) << i;
    EXPECT_GT(measured->layers[i].backward_ms, 0) << layers[i].name;
  }
  EXPECT_GT(measured->forward_ms, 0);
  EXPECT_GT(measured->optimizer_ns_per_param, 0);
  EXPECT_EQ(measured->model, spec);
  EXPECT_EQ(measured->micro_batch, 2);
  EXPECT_EQ(measured->seq_len, 16);
}

TEST(MeasureCompute, BadInputsAreErrors) {
  EXPECT_FALSE(measure_compute("gpt2-nope", 2, 16, 1).is_ok());
  EXPECT_FALSE(measure_compute("gpt2-tiny vocab_size=256 n_ctx=16", 2, 32, 1).is_ok());
  EXPECT_FALSE(measure_compute("gpt2-tiny vocab_size=256 n_ctx=16", 2, 16, 0).is_ok());
}

TEST(MeasureCodecs, RatesArePositive) {
  const std::vector<std::string> names = {"none", "bf16", "powersgd", "topk", "lbs", "gtopk"};
  auto rates = measure_codecs(names, 1 << 16, 2);
  ASSERT_TRUE(rates.is_ok()) << rates.status().message();
  ASSERT_EQ(rates->size(), names.size());
  for (const auto& name : names) {
    EXPECT_GT(rates->at(name).encode_gbps, 0) << name;
    EXPECT_GT(rates->at(name).decode_gbps, 0) << name;
  }
}

TEST(MeasureCodecs, UnknownNameIsAnError) {
  auto rates = measure_codecs({"none", "zip"}, 1024);
  ASSERT_FALSE(rates.is_ok());
  EXPECT_NE(rates.status().message().find("zip"), std::string::npos) << rates.status().message();
}

// Timings made from a known alpha and bandwidth, with a bent middle (TCP windows) that the
// fit must ignore: both figures come back exactly.
TEST(FitLink, RecoversKnownAlphaAndBandwidth) {
  const double alpha = 120e-6, gbps = 0.95;
  const double s_per_byte = 8.0 / (gbps * 1e9);
  std::vector<LinkSample> samples;
  for (std::size_t n : default_link_sizes()) {
    double t = alpha + static_cast<double>(n) * s_per_byte;
    if (n > 8 && n < (1u << 20)) t *= 1.7;  // neither small nor large: not used
    samples.push_back({n, t});
  }
  auto link = fit_link(samples, "1gbit");
  ASSERT_TRUE(link.is_ok()) << link.status().message();
  EXPECT_EQ(link->name, "1gbit");
  EXPECT_NEAR(link->alpha_us, alpha * 1e6, 1e-6);
  EXPECT_NEAR(link->gbps, gbps, 1e-9);
}

TEST(FitLink, TooFewSizesAreErrors) {
  EXPECT_FALSE(fit_link({{8, 1e-4}, {1 << 21, 0.02}}, "x").is_ok());  // one large size
  EXPECT_FALSE(fit_link({{1 << 21, 0.02}, {1 << 24, 0.2}}, "x").is_ok());  // no small size
  EXPECT_FALSE(fit_link({{8, 1e-4}, {1 << 21, 0.2}, {1 << 24, 0.02}}, "x").is_ok());  // falls
}

TEST(DefaultLinkSizes, From8BytesTo64MiB) {
  const auto sizes = default_link_sizes();
  ASSERT_FALSE(sizes.empty());
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), std::size_t{64} << 20);
}

// The profiles under profiles/ (measured here by sim_profile, or written by hand) are complete:
// each loads, has compute, codecs and at least one link.
TEST(CommittedProfiles, EveryFileLoads) {
  const std::filesystem::path dir = std::filesystem::path(SPARQ_SOURCE_DIR) / "profiles";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " not found";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    auto p = load_profile(entry.path().string());
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    EXPECT_TRUE(p->measured || p->flops) << entry.path();
    EXPECT_FALSE(p->codecs.empty()) << entry.path();
    EXPECT_FALSE(p->networks.empty()) << entry.path();
  }
  EXPECT_GT(files, 0);
}

}  // namespace
}  // namespace sparq::sim
