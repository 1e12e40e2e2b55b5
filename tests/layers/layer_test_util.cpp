#include "layer_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/rng.h"

namespace sparq::testing {

std::vector<double> random_vec(std::size_t n, std::uint64_t seed, double scale) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * normal_at(seed, 99, i);
  return v;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

std::vector<float> tie_heavy(std::size_t n, std::uint64_t seed) {
  std::vector<float> v = to_float(random_vec(n, seed, 1.5));
  for (float& f : v) f = std::round(f);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double weighted_sum(const std::vector<double>& y, const std::vector<double>& w) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

void expect_gradient(const std::function<double()>& f, std::vector<double>& x,
                     const std::vector<double>& analytic, const std::string& what, int max_checks,
                     double tol) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const std::size_t n = x.size();
  const std::size_t step = std::max<std::size_t>(1, n / static_cast<std::size_t>(max_checks));
  const double h = 1e-5;
  int checked = 0;
  for (std::size_t i = 0; i < n; i += step, ++checked) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f();
    x[i] = saved - h;
    const double down = f();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    ASSERT_NEAR(analytic[i], numeric, tol * std::max(1.0, std::fabs(numeric)))
        << what << " element " << i;
  }
  ASSERT_GT(checked, 0) << what;
}

Tensor view(std::vector<float>& v, Shape shape) {
  EXPECT_EQ(static_cast<std::int64_t>(v.size()), shape.numel());
  return Tensor(v.data(), DType::kF32, shape);
}

void copy_into(const Tensor& dst, const std::vector<float>& src) {
  ASSERT_EQ(dst.numel(), static_cast<std::int64_t>(src.size())) << dst.str();
  std::memcpy(dst.raw(), src.data(), src.size() * sizeof(float));
}

std::vector<float> to_vector(const Tensor& t) {
  const float* p = t.data<float>();
  return {p, p + t.numel()};
}

void expect_close(const float* got, const std::vector<float>& want, const std::string& what,
                  double rtol) {
  double scale = 0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rtol * (std::fabs(want[i]) + scale)) << what << " element " << i;
  }
}

Shape RefTensor::shape() const {
  switch (dims.size()) {
    case 0: return Shape();
    case 1: return Shape{dims[0]};
    case 2: return Shape{dims[0], dims[1]};
    case 3: return Shape{dims[0], dims[1], dims[2]};
    default: return Shape{dims[0], dims[1], dims[2], dims[3]};
  }
}

std::int64_t RefTensor::numel() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

RefCase::RefCase(const std::string& name) : name_(name) {
  const std::string path = std::string(SPARQ_SOURCE_DIR) + "/tests/reference/layers/" + name + ".bin";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "missing reference file " << path
                  << " (regenerate with /usr/bin/python3 tests/reference/gen_layers.py)";
    return;
  }
  char magic[8];
  in.read(magic, 8);
  if (std::memcmp(magic, "SPQREF01", 8) != 0) {
    ADD_FAILURE() << path << " is not a SPQREF01 file";
    return;
  }
  auto read = [&](void* p, std::size_t n) { in.read(static_cast<char*>(p), static_cast<std::streamsize>(n)); };
  std::uint32_t count = 0;
  read(&count, 4);
  for (std::uint32_t t = 0; t < count && in; ++t) {
    std::uint32_t len = 0;
    read(&len, 4);
    std::string key(len, '\0');
    read(key.data(), len);
    std::uint8_t dtype = 0, ndim = 0;
    read(&dtype, 1);
    read(&ndim, 1);
    RefTensor r;
    r.dims.resize(ndim);
    read(r.dims.data(), 8 * ndim);
    const auto n = static_cast<std::size_t>(r.numel());
    if (dtype == 0) { r.f32.resize(n); read(r.f32.data(), 4 * n); }
    else if (dtype == 1) { r.i32.resize(n); read(r.i32.data(), 4 * n); }
    else { r.u8.resize(n); read(r.u8.data(), n); }
    tensors_[key] = std::move(r);
  }
  if (!in) ADD_FAILURE() << path << " is truncated";
}

const RefTensor& RefCase::at(const std::string& key) const {
  auto it = tensors_.find(key);
  if (it == tensors_.end()) {
    ADD_FAILURE() << name_ << ": reference has no tensor '" << key << "'";
    static const RefTensor empty;
    return empty;
  }
  return it->second;
}

}  // namespace sparq::testing
