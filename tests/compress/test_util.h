// Helpers shared by the compression tests: seeded inputs and compressors built by name.
#pragma once

#include <gtest/gtest.h>

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

inline std::unique_ptr<Compressor> make(const std::string& name,
                                        std::map<std::string, std::string> params = {}) {
  CompressConfig config;
  config.name = name;
  config.params = std::move(params);
  auto result = make_compressor(config);
  EXPECT_TRUE(result.is_ok()) << result.status().message();
  return result.is_ok() ? std::move(result).value() : nullptr;
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

}  // namespace sparq::compress::testing
