#include "core/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/threading.h"

namespace sparq::ops {
namespace {

constexpr std::size_t kParallelThreshold = 1 << 15;

// Note [Thread-free reductions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A reduction cuts its input into chunks of kReduceChunk values (a fixed partition: it
// depends on n only), sums each chunk, and adds the chunk partials in chunk order from 0;
// threads only share out the chunks. The result is therefore the same bits on any thread
// count. Split by threads instead (as until 2026-12-07), the gradient norm that every rank
// computes from the same averaged gradient came out a few ulps apart on ranks that ran other
// thread counts (train.threads: 0 on unlike nodes), and a clip scale rounding one way on one
// rank and the other way on another left the replicas apart for good, unseen (review).
constexpr std::size_t kReduceChunk = kParallelThreshold;

template <typename Body>
double reduce(std::size_t n, Body body) {
  if (n <= kReduceChunk) return body(0, n);
  const std::size_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for schedule(static)
  for (std::size_t c = 0; c < chunks; ++c) {
    partial[c] = body(c * kReduceChunk, std::min(n, (c + 1) * kReduceChunk));
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

// Note [Reduction lanes]: a double reduction written as `s += x[i]` is a chain of dependent
// adds; `#pragma omp simd reduction` was meant to break it but GCC lowered it to per-lane
// memory and gathers, 9x slower than a streaming read (4.3 ms for 6.4M floats against
// 0.5 ms; it sat on every step's gradient norm and every compressed bucket's metrics). Each
// chunk is instead summed into kLanes explicit double accumulators, element i into lane
// i % kLanes, the lanes then added in order, then the chunk's tail: the compiler vectorises
// the lane loop without reassociating anything, so the result is the same bits on any vector
// width (AVX2 or AVX-512), and on any thread count (Note [Thread-free reductions]). The same GCC 12
// lowering turned `omp parallel for simd` over plain elementwise loops elsewhere (adam's local
// momentum, dgc, send_history, top-k counting) into gathers; those say `omp parallel for` and leave
// the vectorising to the compiler. Check a hot loop with -fopt-info-vec-missed: a
// __builtin_ia32_gather* there on contiguous data is this bug.
constexpr std::size_t kLanes = 16;

template <typename Term>
double lane_sum(std::size_t b, std::size_t e, Term term) {
  double lanes[kLanes] = {};
  std::size_t i = b;
  for (; i + kLanes <= e; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) lanes[l] += term(i + l);
  }
  double s = 0.0;
  for (std::size_t l = 0; l < kLanes; ++l) s += lanes[l];
  for (; i < e; ++i) s += term(i);
  return s;
}

double sum(const float* x, std::size_t n) {
  return reduce(n, [x](std::size_t b, std::size_t e) {
    return lane_sum(b, e, [x](std::size_t i) { return static_cast<double>(x[i]); });
  });
}

double dot(const float* x, const float* y, std::size_t n) {
  return reduce(n, [x, y](std::size_t b, std::size_t e) {
    // A product of two floats is exact in double, so FMA contraction cannot change it.
    return lane_sum(b, e, [x, y](std::size_t i) { return static_cast<double>(x[i]) * y[i]; });
  });
}

double sum_squares(const float* x, std::size_t n) { return dot(x, x, n); }

float max_abs(const float* x, std::size_t n) {
  float m = 0.0f;
  int nan = 0;  // std::fmax drops a NaN: counted apart, so that one makes the result NaN
#pragma omp parallel for simd reduction(max : m) reduction(| : nan) if (n > kParallelThreshold)
  for (std::size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = std::fmax(m, a);
    nan |= static_cast<int>(a != a);
  }
  return nan != 0 ? std::numeric_limits<float>::quiet_NaN() : m;
}

bool all_finite(const float* x, std::size_t n) {
  // An entry is NaN or +-Inf exactly when its exponent bits are all ones; OR-ing that test
  // over the array has no long dependency chain, so the loop runs at memory speed.
  const double bad = reduce(n, [x](std::size_t b, std::size_t e) {
    std::uint32_t any = 0;
    for (std::size_t i = b; i < e; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, x + i, sizeof(bits));
      any |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    return static_cast<double>(any);
  });
  return bad == 0.0;
}

}  // namespace sparq::ops
