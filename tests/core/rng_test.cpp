#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "core/rng.h"
#include "core/threading.h"

namespace sparq {
namespace {

TEST(Philox, KnownAnswer) {
  // Random123's published known-answer test for philox4x32-10: counter and key all zero,
  // and counter = 0xffffffff.., key = 0xffffffff...
  const auto zero = philox4x32(0, 0, 0);
  EXPECT_EQ(zero[0], 0x6627e8d5u);
  EXPECT_EQ(zero[1], 0xe169c58du);
  EXPECT_EQ(zero[2], 0xbc57ac4cu);
  EXPECT_EQ(zero[3], 0x9b00dbd8u);
  const auto ones = philox4x32(~0ull, ~0ull, ~0ull);
  EXPECT_EQ(ones[0], 0x408f276du);
  EXPECT_EQ(ones[1], 0x41c83b0eu);
  EXPECT_EQ(ones[2], 0xa20bc7c6u);
  EXPECT_EQ(ones[3], 0x6d5451fdu);
}

TEST(Rng, ReproducibleAndAddressable) {
  Rng a(42, make_stream(RngPurpose::kData, 0, 0));
  Rng b(42, make_stream(RngPurpose::kData, 0, 0));
  std::vector<std::uint32_t> seq;
  for (int i = 0; i < 100; ++i) {
    seq.push_back(a.next_u32());
    ASSERT_EQ(seq.back(), b.next_u32());
  }
  // Element-addressed access gives the same sequence.
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(random_u32_at(42, make_stream(RngPurpose::kData, 0, 0), i), seq[i]);
  }
  // A restored state continues where it left off.
  Rng c(a.state());
  EXPECT_EQ(c.next_u32(), a.next_u32());
}

TEST(Rng, StreamsAreIndependent) {
  // Different purposes, ranks and indices give different sequences; correlations are small.
  const std::uint64_t streams[] = {make_stream(RngPurpose::kInit, 0, 0),
                                   make_stream(RngPurpose::kDropout, 0, 0),
                                   make_stream(RngPurpose::kDropout, 1, 0),
                                   make_stream(RngPurpose::kDropout, 0, 1)};
  std::set<std::uint64_t> unique(std::begin(streams), std::end(streams));
  EXPECT_EQ(unique.size(), 4u);
  const int n = 20000;
  for (int s = 0; s < 4; ++s) {
    for (int t = s + 1; t < 4; ++t) {
      double sxy = 0, sx = 0, sy = 0, sxx = 0, syy = 0;
      for (int i = 0; i < n; ++i) {
        const double x = uniform_at(1, streams[s], i), y = uniform_at(1, streams[t], i);
        sx += x; sy += y; sxy += x * y; sxx += x * x; syy += y * y;
      }
      const double cov = sxy / n - (sx / n) * (sy / n);
      const double corr = cov / std::sqrt((sxx / n - sx * sx / n / n) * (syy / n - sy * sy / n / n));
      EXPECT_LT(std::fabs(corr), 0.03) << s << " vs " << t;  // ~4 sigma for n = 20000
    }
  }
}

TEST(Rng, DistributionsHaveTheRightMoments) {
  const int n = 200000;
  std::vector<float> u(n), g(n);
  fill_uniform(u.data(), n, -1.0f, 3.0f, 5, 9);
  fill_normal(g.data(), n, 0.0f, 2.0f, 5, 9);
  double su = 0, sg = 0, sgg = 0;
  float umin = 10, umax = -10;
  for (int i = 0; i < n; ++i) {
    su += u[i]; sg += g[i]; sgg += static_cast<double>(g[i]) * g[i];
    umin = std::min(umin, u[i]); umax = std::max(umax, u[i]);
  }
  EXPECT_NEAR(su / n, 1.0, 0.01);
  EXPECT_GE(umin, -1.0f);
  EXPECT_LT(umax, 3.0f);
  EXPECT_NEAR(sg / n, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sgg / n), 2.0, 0.02);
  Rng r(3, 4);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) counts[r.below(7)]++;
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
}

TEST(Rng, FillIsIndependentOfThreadCount) {
  const int n = 100000;
  std::vector<float> a(n), b(n);
  const int saved = max_threads();
  set_num_threads(1);
  fill_normal(a.data(), n, 0.0f, 1.0f, 11, 3, 17);
  set_num_threads(4);
  fill_normal(b.data(), n, 0.0f, 1.0f, 11, 3, 17);
  set_num_threads(saved);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0], normal_at(11, 3, 17));
}

}  // namespace
}  // namespace sparq
