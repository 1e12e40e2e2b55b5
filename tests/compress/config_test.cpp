#include <gtest/gtest.h>

#include "compress/registry.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

Status build(const std::string& name, std::map<std::string, std::string> params) {
  CompressConfig config{name, std::move(params), "compress"};
  auto result = make_compressor(config);
  return result.is_ok() ? Status::ok() : result.status();
}

void expect_rejected(const std::string& name, std::map<std::string, std::string> params,
                     const std::string& key) {
  const Status s = build(name, params);
  ASSERT_FALSE(s.is_ok()) << name;
  EXPECT_NE(s.message().find("compress." + key), std::string::npos) << s.message();
}

TEST(CompressConfig, EveryNameBuildsWithDefaults) {
  for (const std::string& name : testing::builtin_compressor_names()) {
    auto c = testing::make(name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->name(), name);
  }
}

TEST(CompressConfig, UnknownNameListsTheKnownOnes) {
  const Status s = build("topkk", {});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("compress.name"), std::string::npos);
  EXPECT_NE(s.message().find("lbs"), std::string::npos);
}

TEST(CompressConfig, DensityOutsideUnitIntervalIsRejected) {
  for (const char* name : {"topk", "topk_sampled", "randomk", "lbs"}) {
    expect_rejected(name, {{"density", "0"}}, "density");
    expect_rejected(name, {{"density", "1.5"}}, "density");
    expect_rejected(name, {{"density", "-0.1"}}, "density");
    expect_rejected(name, {{"density", "abc"}}, "density");
    // strtod's hexadecimal and leading blanks, which no YAML number has (review, 2026-12-06).
    expect_rejected(name, {{"density", "0x1p-7"}}, "density");
    expect_rejected(name, {{"density", " 0.5"}}, "density");
    EXPECT_TRUE(build(name, {{"density", "1"}}).is_ok());
  }
}

TEST(CompressConfig, UnsupportedBitsAndBlocksAreRejected) {
  for (const char* name : {"blockquant", "lbs"}) {
    expect_rejected(name, {{"bits", "5"}}, "bits");
    expect_rejected(name, {{"bits", "1"}}, "bits");
    expect_rejected(name, {{"bits", "four"}}, "bits");
    expect_rejected(name, {{"block", "100"}}, "block");
    expect_rejected(name, {{"block", "0"}}, "block");
    expect_rejected(name, {{"rounding", "up"}}, "rounding");
    for (const char* bits : {"2", "3", "4", "8"}) {
      EXPECT_TRUE(build(name, {{"bits", bits}}).is_ok());
    }
  }
  expect_rejected("lbs", {{"selection", "approx"}}, "selection");
  // The strategy is compress.aggregation for every compressor; lbs's old duplicate of it is
  // refused with a pointer to the replacement, whatever its value.
  for (const char* value : {"two_phase", "allgather"}) {
    const Status s = build("lbs", {{"exchange", value}});
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("compress.exchange: this key was removed"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("compress.aggregation: two_phase"), std::string::npos)
        << s.message();
  }
}

TEST(CompressConfig, OtherKeysAreRangeChecked) {
  expect_rejected("qsgd", {{"levels", "0"}}, "levels");
  expect_rejected("qsgd", {{"levels", "200"}}, "levels");
  expect_rejected("qsgd", {{"chunk", "12"}}, "chunk");
  expect_rejected("powersgd", {{"rank", "0"}}, "rank");
  expect_rejected("powersgd", {{"alternate", "maybe"}}, "alternate");
  expect_rejected("terngrad", {{"clip_sigma", "0"}}, "clip_sigma");
  expect_rejected("threshold", {{"threshold", "-1"}}, "threshold");
  // 1e-50 is 0 as an f32: every entry, zeros included, would be sent.
  expect_rejected("threshold", {{"threshold", "1e-50"}},
                  "threshold: must be in [1.1754943508222875e-38");
}

TEST(CompressConfig, UnknownKeysAreRejected) {
  expect_rejected("topk", {{"densty", "0.1"}}, "densty");
  expect_rejected("none", {{"bits", "4"}}, "bits");
  expect_rejected("signsgd", {{"scale", "1"}}, "scale");
}

}  // namespace
}  // namespace sparq::compress
