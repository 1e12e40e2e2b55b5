// Reader for the golden files that tests/reference/gen_models.py writes (the format and the
// weight formula are documented at the top of that script), and the comparison helpers the
// model tests share.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/param_store.h"
#include "core/tensor.h"

namespace sparq::testing {

struct GoldenParam {
  std::string name;
  Shape shape;
  double center = 0, scale = 0, sum = 0;  // recipe of the initial value, and its checksum
};

struct GoldenTensor {
  Buffer storage;
  Tensor view;
};

struct Golden {
  std::string spec;
  std::int64_t batch = 0, seq = 0;
  std::vector<GoldenParam> params;  // forward order
  std::map<std::string, GoldenTensor> tensors;
  std::map<std::string, std::vector<double>> scalars;

  const Tensor& tensor(const std::string& name) const;
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  double scalar(const std::string& name, std::size_t i = 0) const;
};

// Path of tests/reference/models/<file> in the source tree.
std::string golden_path(const std::string& file);
// Parses a golden file; a malformed file fails the calling test with a message (gtest).
Golden load_golden(const std::string& path);

// The documented weight formula: float32(center + scale * u_i) for element i of `name`.
void formula_fill(const std::string& name, double center, double scale, float* out,
                  std::int64_t n);
// Fills every parameter of `store` from the golden recipes (by name) and checks each
// checksum, so a generator mismatch is reported as such rather than as a wrong gradient.
void load_formula_weights(const Golden& golden, ParamStore& store);

// Element-wise check |actual - expected| <= rtol * (|expected| + max|expected|) + atol over
// a [rows, cols] block; `actual_stride` is the row pitch of actual (>= cols). Reports the
// worst element with its index. atol matters only for tensors that are zero in exact
// arithmetic (a conv bias before BatchNorm), where float32 leaves rounding noise.
void expect_close(const std::string& what, const float* actual, std::int64_t actual_stride,
                  const Tensor& expected, double rtol, double atol = 0.0);
void expect_close(const std::string& what, const Tensor& actual, const Tensor& expected,
                  double rtol, double atol = 0.0);

}  // namespace sparq::testing
