#include "models/golden_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sparq::testing {

const Tensor& Golden::tensor(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) {
    ADD_FAILURE() << "golden file has no tensor '" << name << "'";
    static const Tensor empty;
    return empty;
  }
  return it->second.view;
}

double Golden::scalar(const std::string& name, std::size_t i) const {
  const auto it = scalars.find(name);
  if (it == scalars.end() || i >= it->second.size()) {
    ADD_FAILURE() << "golden file has no scalar '" << name << "'[" << i << "]";
    return NAN;
  }
  return it->second[i];
}

std::string golden_path(const std::string& file) {
  return std::string(SPARQ_SOURCE_DIR) + "/tests/reference/models/" + file;
}

namespace {

Shape read_shape(std::istringstream& line) {
  int ndim = 0;
  line >> ndim;
  std::int64_t d[4] = {1, 1, 1, 1};
  for (int i = 0; i < ndim && i < 4; ++i) line >> d[i];
  switch (ndim) {
    case 1: return Shape{d[0]};
    case 2: return Shape{d[0], d[1]};
    case 3: return Shape{d[0], d[1], d[2]};
    case 4: return Shape{d[0], d[1], d[2], d[3]};
    default: ADD_FAILURE() << "unsupported rank " << ndim; return Shape{};
  }
}

}  // namespace

Golden load_golden(const std::string& path) {
  Golden g;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path << " (regenerate with tests/reference/gen_models.py)";
    return g;
  }
  std::string text;
  std::getline(in, text);
  if (text != "sparq-golden 1") {
    ADD_FAILURE() << path << ": not a golden file (first line '" << text << "')";
    return g;
  }
  std::vector<std::string> order;
  while (std::getline(in, text) && text != "end") {
    std::istringstream line(text);
    std::string kind;
    line >> kind;
    if (kind == "spec") {
      g.spec = text.substr(5);
    } else if (kind == "batch") {
      line >> g.batch >> g.seq;
    } else if (kind == "param") {
      GoldenParam p;
      line >> p.name;
      p.shape = read_shape(line);
      line >> p.center >> p.scale >> p.sum;
      g.params.push_back(p);
    } else if (kind == "tensor") {
      std::string name, dtype;
      line >> name >> dtype;
      const Shape shape = read_shape(line);
      const DType dt = dtype == "f32" ? DType::kF32 : dtype == "i32" ? DType::kI32 : DType::kU8;
      GoldenTensor t;
      t.storage = Buffer::host(std::max<std::size_t>(64, shape.numel() * dtype_size(dt)));
      t.view = Tensor(t.storage.data(), dt, shape);
      g.tensors.emplace(name, std::move(t));
      order.push_back(name);
    } else if (kind == "scalars") {
      std::string name;
      std::size_t n = 0;
      line >> name >> n;
      std::vector<double> values(n);
      for (double& v : values) line >> v;
      g.scalars[name] = values;
    } else {
      ADD_FAILURE() << path << ": unknown header line '" << text << "'";
    }
  }
  for (const std::string& name : order) {
    const Tensor& t = g.tensors.at(name).view;
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    if (!in) ADD_FAILURE() << path << ": truncated data for tensor " << name;
  }
  return g;
}

void formula_fill(const std::string& name, double center, double scale, float* out,
                  std::int64_t n) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  for (const unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t z = h + static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    z += 0x9E3779B97F4A7C15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1p-52 - 1.0;
    // volatile keeps the compiler from fusing this into an FMA, which Python does not do.
    volatile double product = scale * u;
    out[i] = static_cast<float>(center + product);
  }
}

void load_formula_weights(const Golden& golden, ParamStore& store) {
  for (const GoldenParam& p : golden.params) {
    ASSERT_TRUE(store.contains(p.name)) << "model lacks golden parameter " << p.name;
    const Tensor t = store.param(p.name);
    ASSERT_EQ(t.shape().str(), p.shape.str()) << p.name;
    formula_fill(p.name, p.center, p.scale, t.data<float>(), t.numel());
    double sum = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) sum += t.data<float>()[i];
    ASSERT_NEAR(sum, p.sum, 1e-9 * (1.0 + std::fabs(p.sum)))
        << p.name << ": the weight formula disagrees with the generator";
  }
}

void expect_close(const std::string& what, const float* actual, std::int64_t actual_stride,
                  const Tensor& expected, double rtol, double atol) {
  ASSERT_EQ(expected.dtype(), DType::kF32) << what;
  const std::int64_t cols = expected.ndim() == 0 ? 1 : expected.dim(expected.ndim() - 1);
  const std::int64_t rows = expected.numel() / cols;
  const float* e = expected.data<float>();
  double scale = 0;
  for (std::int64_t i = 0; i < expected.numel(); ++i) scale = std::max(scale, std::fabs(double(e[i])));
  double worst = 0;
  std::int64_t worst_r = 0, worst_c = 0, bad = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const double a = actual[r * actual_stride + c], x = e[r * cols + c];
      const double excess = std::fabs(a - x) / (rtol * (std::fabs(x) + scale) + atol + 1e-30);
      if (!(excess <= 1.0)) ++bad;
      if (!(excess <= worst)) {
        worst = excess;
        worst_r = r, worst_c = c;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << rows * cols
                    << " elements off; worst at [" << worst_r << ", " << worst_c << "]: got "
                    << actual[worst_r * actual_stride + worst_c] << ", expected "
                    << e[worst_r * cols + worst_c] << " (tensor max |x| " << scale << ")";
}

void expect_close(const std::string& what, const Tensor& actual, const Tensor& expected,
                  double rtol, double atol) {
  ASSERT_EQ(actual.numel(), expected.numel()) << what << ": " << actual.str() << " vs "
                                              << expected.str();
  const std::int64_t cols = expected.ndim() == 0 ? 1 : expected.dim(expected.ndim() - 1);
  expect_close(what, actual.data<float>(), cols, expected, rtol, atol);
}

}  // namespace sparq::testing
