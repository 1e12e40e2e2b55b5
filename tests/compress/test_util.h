// Helpers shared by the compression tests: seeded inputs and compressors built by name.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compress/registry.h"
#include "core/rng.h"

namespace sparq::compress::testing {

inline std::vector<float> normal_vector(std::size_t n, std::uint64_t seed, float stddev = 1.0f) {
  std::vector<float> v(n);
  fill_normal(v.data(), n, 0.0f, stddev, seed, 7);
  return v;
}

// The built-in compressors, in registration order. The registry tests register more (one of
// them deliberately broken), so a test that walks every compressor takes this list, not
// compressor_names(): its result must not depend on the order the tests run in.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline const std::vector<std::string>& builtin_compressor_names() {
  static const std::vector<std::string> names = {
      "none", "fp16",     "bf16",    "topk",   "topk_sampled", "randomk",  "threshold", "gtopk",
      "qsgd", "terngrad", "signsgd", "onebit", "blockquant",   "powersgd", "dgc",       "lbs"};
  return names;
}

inline std::unique_ptr<Compressor> make(const std::string& name,
                                        std::map<std::string, std::string> params = {}) {
  CompressConfig config;
  config.name = name;
  config.params = std::move(params);
  auto result = make_compressor(config);
  EXPECT_TRUE(result.is_ok()) << result.status().message();
  return result.is_ok() ? std::move(result).value() : nullptr;
}

// NaN compares unequal to itself; a NaN is matched by a NaN. With `one_step`, a value one
// float step away also matches: y + v * f is one fma on the device and on an FMA host when
// g++ contracts it, which it may not through every ternary (Note [Byte-identical block
// codes]); messages and kSet decodes are compared exactly.
inline void expect_same_floats(const std::vector<float>& got, const std::vector<float>& want,
                               const std::string& what, bool one_step = false) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " " << i;
    } else if (one_step) {
      ASSERT_TRUE(got[i] == want[i] || std::nextafter(got[i], want[i]) == want[i])
          << what << " " << i << ": " << got[i] << " vs " << want[i];
    } else {
      ASSERT_EQ(got[i], want[i]) << what << " " << i;
    }
  }
}

inline double squared_norm(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += static_cast<double>(x) * x;
  return s;
}

inline double squared_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    s += d * d;
  }
  return s;
}

// A configuration of one compressor, for the tests that sweep every compressor.
struct CompressorCase {
  std::string name;
  std::map<std::string, std::string> params;
};

// Every compressor in the configurations the sweeping tests check (with dgc's momentum and
// gtopk, whose own encode is topk's; a test whose property does not apply to them filters them
// out and says why).
inline std::vector<CompressorCase> all_compressor_cases() {
  return {{"none", {}},
          {"fp16", {}},
          {"bf16", {}},
          {"topk", {{"density", "0.02"}}},
          {"topk", {{"density", "0.9"}}},
          {"topk_sampled", {{"density", "0.02"}}},
          {"gtopk", {{"density", "0.05"}}},
          {"randomk", {{"density", "0.05"}}},
          {"threshold", {{"threshold", "1.5"}}},
          {"qsgd", {{"levels", "7"}, {"chunk", "128"}}},
          {"terngrad", {}},
          {"signsgd", {}},
          {"onebit", {}},
          {"powersgd", {{"rank", "2"}, {"min_compress_numel", "16"}}},
          {"dgc", {{"density", "0.05"}}},
          {"blockquant", {{"bits", "4"}}},
          {"blockquant", {{"bits", "3"}, {"block", "64"}, {"rounding", "stochastic"}}},
          {"lbs", {}},
          {"lbs", {{"density", "0.2"}, {"bits", "2"}, {"selection", "sampled"}}},
          {"lbs", {{"density", "0.3"}, {"bits", "8"}, {"rounding", "stochastic"}}}};
}

}  // namespace sparq::compress::testing
