// The compression metrics in the step record and the progress line, and the config keys
// behind them (compress.density_warmup_steps, log.never_sent_window): their errors name the
// key, and they survive the effective-YAML round trip.
#include <gtest/gtest.h>

#include <string>

#include "train/metrics.h"
#include "train/train_config.h"

namespace sparq::train {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CompressionMetrics, StepRecordCarriesTheErrorsOrNull) {
  StepMetrics m;
  std::string json = to_json(m);
  EXPECT_TRUE(contains(json, "\"rel_compression_error\":null,")) << json;
  EXPECT_TRUE(contains(json, "\"bucket_rel_error\":null,")) << json;
  EXPECT_TRUE(contains(json, "\"never_sent_share\":null,")) << json;
  EXPECT_FALSE(contains(format_progress(m), "err"));

  m.rel_compression_error = 0.5;
  m.bucket_rel_error = {0.25, 0.75};
  m.never_sent_share = 0.125;
  json = to_json(m);
  EXPECT_TRUE(contains(json, "\"rel_compression_error\":0.5,")) << json;
  EXPECT_TRUE(contains(json, "\"bucket_rel_error\":[0.25,0.75],")) << json;
  EXPECT_TRUE(contains(json, "\"never_sent_share\":0.125,")) << json;
  EXPECT_TRUE(contains(format_progress(m), "(x1.0, err 0.500)")) << format_progress(m);
}

void expect_error(const std::string& yaml, const std::string& key) {
  auto c = parse_train_config(yaml, "c.yaml", {});
  ASSERT_FALSE(c.is_ok()) << yaml;
  EXPECT_TRUE(contains(c.status().message(), "c.yaml")) << c.status().message();
  EXPECT_TRUE(contains(c.status().message(), key)) << c.status().message();
}

TEST(CompressionMetrics, DensityWarmupNeedsADensity) {
  auto c = parse_train_config("compress: {name: lbs, density_warmup_steps: 20}", "c.yaml", {});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->compress.density_warmup_steps, 20);
  EXPECT_TRUE(contains(c->resolved_yaml, "  density_warmup_steps: 20\n")) << c->resolved_yaml;
  auto again = parse_train_config(c->resolved_yaml, "effective", {});
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->compress.density_warmup_steps, 20);

  // The dense casts ignore it: a config with a warm-up runs dense with compress.name=none (or
  // bf16, fp16) alone.
  for (const char* name : {"none", "fp16", "bf16"}) {
    const auto dense = parse_train_config(
        std::string("compress: {name: ") + name + ", density_warmup_steps: 5}", "c.yaml", {});
    EXPECT_TRUE(dense.is_ok()) << name << ": " << dense.status().message();
  }
  for (const char* name : {"blockquant", "qsgd", "powersgd"}) {
    expect_error(std::string("compress: {name: ") + name + ", density_warmup_steps: 5}",
                 "compress.density_warmup_steps");
  }
  expect_error("compress: {name: dgc, density_warmup_steps: 5, dgc: {warmup_steps: 3}}",
               "compress.dgc.warmup_steps");
  expect_error("compress: {name: lbs, density_warmup_steps: -1}", "compress.density_warmup_steps");
}

TEST(CompressionMetrics, NeverSentWindowNeedsErrorFeedback) {
  auto c = parse_train_config("compress: {name: topk}\nlog: {never_sent_window: 8}", "c.yaml", {});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->log.never_sent_window, 8);
  EXPECT_TRUE(contains(c->resolved_yaml, "  never_sent_window: 8\n")) << c->resolved_yaml;
  auto dense = parse_train_config("log: {never_sent_window: 8}", "c.yaml", {});
  EXPECT_TRUE(dense.is_ok()) << dense.status().message();  // nothing compressed: null records
  expect_error("compress: {name: topk, error_feedback: false}\nlog: {never_sent_window: 8}",
               "log.never_sent_window");
  expect_error("log: {never_sent_window: -2}", "log.never_sent_window");
}

}  // namespace
}  // namespace sparq::train
