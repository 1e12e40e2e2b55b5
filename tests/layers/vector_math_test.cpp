// The vectorizable float math of layers/vector_math.h against libm in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "layers/vector_math.h"

namespace sparq {
namespace {

// Largest |f(x) - want(x)| (relative when `relative`) over n + 1 points spread on [lo, hi].
template <typename F, typename G>
double worst_error(F f, G want, double lo, double hi, int n, bool relative) {
  double worst = 0;
  for (int i = 0; i <= n; ++i) {
    const auto x = static_cast<float>(lo + (hi - lo) * i / n);
    const double w = want(static_cast<double>(x));
    const double e = std::fabs(static_cast<double>(f(x)) - w);
    worst = std::max(worst, relative ? e / std::fabs(w) : e);
  }
  return worst;
}

TEST(VectorMath, ExpNonpositiveIsWithinTwoUlpOnTheSoftmaxRange) {
  const double worst = worst_error(cpu::exp_nonpositive, [](double x) { return std::exp(x); },
                                   -87.0, 0.0, 2000000, true);
  EXPECT_LT(worst, 2.5e-7);  // 2 ulp of float
  EXPECT_EQ(cpu::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(cpu::exp_nonpositive(-88.0f), 0.0f);
  EXPECT_EQ(cpu::exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(cpu::exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VectorMath, TanhAndErfAreWithinTheirAbsoluteBounds) {
  EXPECT_LT(worst_error(cpu::tanh_approx, [](double x) { return std::tanh(x); }, -12, 12,
                        1000000, false),
            3e-7);
  EXPECT_LT(worst_error(cpu::erf_approx, [](double x) { return std::erf(x); }, -8, 8, 1000000,
                        false),
            6e-7);
  // Odd, saturating, and exact at 0.
  EXPECT_EQ(cpu::tanh_approx(0.0f), 0.0f);
  EXPECT_NEAR(cpu::erf_approx(0.0f), 0.0f, 1e-7);
  EXPECT_EQ(cpu::tanh_approx(-3.0f), -cpu::tanh_approx(3.0f));
  EXPECT_EQ(cpu::erf_approx(-1.5f), -cpu::erf_approx(1.5f));
  EXPECT_EQ(cpu::tanh_approx(100.0f), 1.0f);
  EXPECT_EQ(cpu::erf_approx(100.0f), 1.0f);
}

}  // namespace
}  // namespace sparq
