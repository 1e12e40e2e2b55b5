// Helpers for the layer tests: random data, float64 central-difference gradient checks,
// binding layers to a ParamStore, and the PyTorch reference files written by
// tests/reference/gen_layers.py (format documented there and in docs/layers.md).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/param_store.h"
#include "core/tensor.h"

namespace sparq::testing {

// N(0, scale^2) values from the core Philox generator.
std::vector<double> random_vec(std::size_t n, std::uint64_t seed, double scale = 1.0);
std::vector<float> to_float(const std::vector<double>& v);
// Integers in [-3, 3] as floats (rounded normal draws): many equal values, so max-pool
// windows have ties.
std::vector<float> tie_heavy(std::size_t n, std::uint64_t seed);
// Whether a and b hold the same floats bit for bit (same size too).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);
double weighted_sum(const std::vector<double>& y, const std::vector<double>& w);

// Compares analytic d f / d x[i] against (f(x + h e_i) - f(x - h e_i)) / 2h in float64, on
// every index when x is small and on an evenly spread sample of `max_checks` otherwise.
void expect_gradient(const std::function<double()>& f, std::vector<double>& x,
                     const std::vector<double>& analytic, const std::string& what,
                     int max_checks = 48, double tol = 1e-6);

// Declares every layer into a fresh store, allocates, initialises (seed 1) and binds.
template <typename... Layers>
ParamStore bind_layers(Layers&... layers) {
  ParamStore store;
  (layers.declare(store), ...);
  store.allocate();
  store.initialize(1);
  (layers.bind(store), ...);
  return store;
}

Tensor view(std::vector<float>& v, Shape shape);
void copy_into(const Tensor& dst, const std::vector<float>& src);
std::vector<float> to_vector(const Tensor& t);

// Element-wise |got - want| <= rtol * (|want| + max|want|) (the second term absorbs the
// cancellation error of values near zero relative to the tensor's scale).
void expect_close(const float* got, const std::vector<float>& want, const std::string& what,
                  double rtol = 1e-5);

struct RefTensor {
  std::vector<std::int64_t> dims;
  std::vector<float> f32;
  std::vector<std::int32_t> i32;
  std::vector<std::uint8_t> u8;
  Shape shape() const;
  std::int64_t numel() const;
};

// One "<case>.bin" under tests/reference/layers.
class RefCase {
 public:
  explicit RefCase(const std::string& name);
  bool has(const std::string& key) const { return tensors_.count(key) != 0; }
  const RefTensor& at(const std::string& key) const;
  // Mutable f32 copy as a view-able vector.
  std::vector<float> f32(const std::string& key) const { return at(key).f32; }

 private:
  std::string name_;
  std::map<std::string, RefTensor> tensors_;
};

}  // namespace sparq::testing
