#include "core/ops.h"

#include <cmath>
#include <vector>

#include "core/threading.h"

namespace sparq::ops {
namespace {

constexpr std::size_t kParallelThreshold = 1 << 15;

// Deterministic parallel reduction: fixed static chunks per thread count, partials summed
// in thread order.
template <typename Body>
double reduce(std::size_t n, Body body) {
  if (n < kParallelThreshold) return body(0, n);
  const int threads = max_threads();
  std::vector<double> partial(threads, 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = thread_index();
    const int nt = team_size();
    const std::size_t begin = n * t / nt, end = n * (t + 1) / nt;
    partial[t] = body(begin, end);
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace

void fill(float* x, std::size_t n, float value) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (std::size_t i = 0; i < n; ++i) x[i] = value;
}

void copy(const float* x, float* y, std::size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i];
}

void scale(float* x, std::size_t n, float alpha) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (std::size_t i = 0; i < n; ++i) x[i] *= alpha;
}

void axpy(float alpha, const float* x, float* y, std::size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void add(const float* a, const float* b, float* out, std::size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

double sum(const float* x, std::size_t n) {
  return reduce(n, [x](std::size_t b, std::size_t e) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::size_t i = b; i < e; ++i) s += x[i];
    return s;
  });
}

double dot(const float* x, const float* y, std::size_t n) {
  return reduce(n, [x, y](std::size_t b, std::size_t e) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::size_t i = b; i < e; ++i) s += static_cast<double>(x[i]) * y[i];
    return s;
  });
}

double sum_squares(const float* x, std::size_t n) { return dot(x, x, n); }

float max_abs(const float* x, std::size_t n) {
  float m = 0.0f;
#pragma omp parallel for simd reduction(max : m) if (n > kParallelThreshold)
  for (std::size_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

bool all_finite(const float* x, std::size_t n) {
  // NaN/Inf propagate through a sum of x*0, which vectorises better than std::isfinite.
  const double s = reduce(n, [x](std::size_t b, std::size_t e) {
    double acc = 0.0;
    for (std::size_t i = b; i < e; ++i) acc += static_cast<double>(x[i]) * 0.0;
    return acc;
  });
  return s == 0.0;
}

}  // namespace sparq::ops
