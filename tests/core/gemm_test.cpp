#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "core/gemm.h"
#include "core/rng.h"

namespace sparq {
namespace {

struct Case {
  bool ta, tb;
  std::int64_t m, n, k;
  std::int64_t pad;  // extra columns in every leading dimension (strided views)
  float alpha, beta;
};

class GemmTest : public ::testing::TestWithParam<Case> {};

TEST_P(GemmTest, MatchesNaiveTripleLoop) {
  const Case c = GetParam();
  GemmShape s{c.ta, c.tb, c.m, c.n, c.k};
  s.lda = (c.ta ? c.m : c.k) + c.pad;
  s.ldb = (c.tb ? c.k : c.n) + c.pad;
  s.ldc = c.n + c.pad;
  const std::int64_t rows_a = c.ta ? c.k : c.m, rows_b = c.tb ? c.n : c.k;
  std::vector<float> a(rows_a * s.lda), b(rows_b * s.ldb), out(c.m * s.ldc), ref;
  fill_uniform(a.data(), a.size(), -1, 1, 1, 1);
  fill_uniform(b.data(), b.size(), -1, 1, 1, 2);
  fill_uniform(out.data(), out.size(), -1, 1, 1, 3);
  ref = out;
  gemm(s, c.alpha, a.data(), b.data(), c.beta, out.data());
  gemm_reference(s, c.alpha, a.data(), b.data(), c.beta, ref.data());
  const float tol = 1e-5f * static_cast<float>(std::max<std::int64_t>(c.k, 1));
  for (std::int64_t i = 0; i < c.m; ++i) {
    for (std::int64_t j = 0; j < s.ldc; ++j) {
      const float want = ref[i * s.ldc + j];
      // Columns past n (the padding) must be untouched.
      if (j >= c.n) {
        ASSERT_EQ(out[i * s.ldc + j], want) << "padding written at " << i << "," << j;
      } else {
        ASSERT_NEAR(out[i * s.ldc + j], want, tol) << i << "," << j;
      }
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const std::tuple<int, int, int> shapes[] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 1, 127},
                                              {1, 129, 31}, {100, 96, 0}};
  for (auto [m, n, k] : shapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        v.push_back({ta == 1, tb == 1, m, n, k, 0, 1.0f, 0.0f});
        v.push_back({ta == 1, tb == 1, m, n, k, 3, -0.5f, 1.0f});
        v.push_back({ta == 1, tb == 1, m, n, k, 1, 2.0f, 0.25f});
      }
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest, ::testing::ValuesIn(cases()));

TEST(Gemm, BetaZeroIgnoresGarbageInC) {
  GemmShape s{false, false, 2, 2, 2};
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[] = {NAN, NAN, NAN, NAN};
  gemm(s, 1.0f, a, b, 0.0f, c);
  EXPECT_EQ(c[0], 19.0f);
  EXPECT_EQ(c[1], 22.0f);
  EXPECT_EQ(c[2], 43.0f);
  EXPECT_EQ(c[3], 50.0f);
}

TEST(Gemm, StridedBatchedMatchesLoopOfGemms) {
  const std::int64_t batch = 6, m = 9, n = 11, k = 13;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      GemmShape s{ta == 1, tb == 1, m, n, k};
      std::vector<float> a(batch * m * k), b(batch * k * n), c(batch * m * n, 0.0f), ref = c;
      fill_uniform(a.data(), a.size(), -1, 1, 2, 1);
      fill_uniform(b.data(), b.size(), -1, 1, 2, 2);
      gemm_strided_batched(s, 1.0f, a.data(), m * k, b.data(), k * n, 0.0f, c.data(), m * n,
                           batch);
      for (std::int64_t i = 0; i < batch; ++i) {
        gemm_reference(s, 1.0f, a.data() + i * m * k, b.data() + i * k * n, 0.0f,
                       ref.data() + i * m * n);
      }
      for (std::size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], ref[i], 1e-4f);
    }
  }
}

}  // namespace
}  // namespace sparq
