#include "core/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/threading.h"

namespace sparq {
namespace {

TEST(Ops, ElementwiseAndReductions) {
  const std::size_t n = 100001;  // above the parallel threshold, odd
  std::vector<float> x(n), y(n), z(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 7) - 3.0f;  // exactly representable sums
    y[i] = 1.0f;
  }
  ops::axpy(2.0f, x.data(), y.data(), n);
  EXPECT_EQ(y[4], 3.0f);
  ops::add(x.data(), y.data(), z.data(), n);
  EXPECT_EQ(z[4], 4.0f);
  ops::scale(z.data(), n, 0.5f);
  EXPECT_EQ(z[4], 2.0f);
  double want_sum = 0, want_sq = 0;
  for (float v : x) { want_sum += v; want_sq += static_cast<double>(v) * v; }
  EXPECT_EQ(ops::sum(x.data(), n), want_sum);
  EXPECT_EQ(ops::sum_squares(x.data(), n), want_sq);
  EXPECT_EQ(ops::max_abs(x.data(), n), 3.0f);
  EXPECT_TRUE(ops::all_finite(x.data(), n));
  x[n - 1] = NAN;
  EXPECT_FALSE(ops::all_finite(x.data(), n));
  EXPECT_TRUE(std::isnan(ops::max_abs(x.data(), n)));  // never dropped, as std::fmax would
  EXPECT_TRUE(std::isnan(ops::max_abs(x.data() + n - 1, 1)));
  EXPECT_EQ(ops::max_abs(x.data(), 0), 0.0f);
  x[n - 1] = INFINITY;
  EXPECT_FALSE(ops::all_finite(x.data(), n));
  ops::fill(x.data(), n, 0.25f);
  ops::copy(x.data(), y.data(), n);
  EXPECT_EQ(y[n - 1], 0.25f);
}

TEST(Ops, ReductionsAreIndependentOfThreadCount) {
  // ctest runs with OMP_NUM_THREADS=1: the thread counts are set here, or the parallel
  // branch of the reduction would never run (review, 2026-12-05).
  const int saved = max_threads();
  // Integer values: every partial sum is exact, so any thread count must give the exact
  // total; a dropped or doubled chunk (the last thread's, a ragged split) changes it.
  const std::size_t n = (1 << 20) + 3;
  std::vector<float> ints(n);
  double exact = 0, exact_sq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ints[i] = static_cast<float>(static_cast<int>(i % 13) - 5) + (i == n - 1 ? 1000.0f : 0.0f);
    exact += ints[i];
    exact_sq += static_cast<double>(ints[i]) * ints[i];
  }
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i)) * 1e-3f;
  double reference = 0;
  for (float v : x) reference += v;
  // Note [Thread-free reductions] (core/ops.cpp): inexact sums too are the same bits on any
  // thread count (split by threads, 4 and 6 threads differed in the last bits: review,
  // 2026-12-07), and equal the documented partition written out here.
  double chunked = 0;
  for (std::size_t begin = 0; begin < n; begin += 1 << 15) {
    set_num_threads(1);
    chunked += ops::sum_squares(x.data() + begin, std::min<std::size_t>(1 << 15, n - begin));
  }
  std::vector<double> sums, squares;
  for (const int threads : {1, 2, 3, 4, 5, 6}) {
    set_num_threads(threads);
    sums.push_back(ops::sum(x.data(), n));
    squares.push_back(ops::sum_squares(x.data(), n));
    EXPECT_EQ(sums.back(), sums.front()) << threads << " threads";
    EXPECT_EQ(squares.back(), chunked) << threads << " threads";
  }
  for (const int threads : {1, 2, 3, 4}) {
    set_num_threads(threads);
    EXPECT_EQ(ops::sum(ints.data(), n), exact) << threads << " threads";
    EXPECT_EQ(ops::sum_squares(ints.data(), n), exact_sq) << threads << " threads";
    EXPECT_TRUE(ops::all_finite(ints.data(), n)) << threads << " threads";
    for (const std::size_t bad : {std::size_t{0}, n / 2 + 1, n - 1}) {  // first, middle, last chunk
      const float kept = ints[bad];
      ints[bad] = bad == n / 2 + 1 ? NAN : INFINITY;
      EXPECT_FALSE(ops::all_finite(ints.data(), n)) << threads << " threads, entry " << bad;
      ints[bad] = kept;
    }
    const double first = ops::sum(x.data(), n);
    EXPECT_NEAR(first, reference, 1e-9) << threads << " threads";
    EXPECT_EQ(ops::sum(x.data(), n), first) << threads << " threads: not deterministic";
  }
  set_num_threads(saved);
}

// Note [Reduction lanes] (core/ops.cpp): element i goes to lane i % 16 of its thread's chunk,
// the lanes are added in order, then the tail. A loop written that way here must give the same
// bits, on a small array (one chunk) whatever the machine's vector width.
TEST(Ops, ReductionsFollowTheDocumentedLaneOrder) {
  const std::size_t n = 1000;  // below the parallel threshold: one chunk; 1000 = 62 * 16 + 8
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * 3.1f;
  double lanes[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (std::size_t l = 0; l < 16; ++l) lanes[l] += static_cast<double>(x[i + l]) * x[i + l];
  }
  double want = 0;
  for (double l : lanes) want += l;
  for (; i < n; ++i) want += static_cast<double>(x[i]) * x[i];
  EXPECT_EQ(ops::sum_squares(x.data(), n), want);
}

TEST(Ops, AllFiniteFindsAnyNonFiniteEntry) {
  const std::size_t n = 70001;
  std::vector<float> x(n, 1.0f);
  x[5] = 3.4e38f;  // the largest finite magnitudes are finite
  x[6] = -3.4e38f;
  EXPECT_TRUE(ops::all_finite(x.data(), n));
  for (const std::size_t at : {std::size_t{0}, std::size_t{15}, n / 2, n - 1}) {
    for (const float bad : {NAN, INFINITY, -INFINITY}) {
      x[at] = bad;
      EXPECT_FALSE(ops::all_finite(x.data(), n)) << at;
      x[at] = 1.0f;
    }
  }
}

}  // namespace
}  // namespace sparq
