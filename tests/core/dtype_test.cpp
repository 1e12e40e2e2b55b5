#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/dtype.h"

namespace sparq {
namespace {

// Reference f16 rounding by brute force: the nearest representable half, ties to even.
std::uint16_t nearest_half(float x) {
  if (std::isnan(x)) return 0x7e00;
  std::uint16_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double ax = std::fabs(static_cast<double>(x));
  if (ax >= 65520.0) return sign | 0x7c00;
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const double v = half_bits_to_float(static_cast<std::uint16_t>(h));
    const double err = std::fabs(v - ax);
    if (err < best_err || (err == best_err && (h & 1) == 0)) {
      best_err = err;
      best = static_cast<std::uint16_t>(h);
    }
  }
  return sign | best;
}

TEST(Half, RoundTripsEveryFiniteHalfExactly) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = half_bits_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(f))));
      continue;
    }
    ASSERT_EQ(float_to_half_bits(f), bits) << "half bits " << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 lies halfway between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // overflow to Inf
  // Smallest denormal 2^-24; half of it ties to even (zero); a bit more rounds up.
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_half_bits(-std::ldexp(3.0f, -25)), 0x8002);  // 1.5 ulp ties to 2
}

TEST(Half, MatchesBruteForceOnManyValues) {
  std::uint32_t state = 12345;
  for (int i = 0; i < 3000; ++i) {
    state = state * 1664525u + 1013904223u;
    // Random bit patterns within half's range, including denormals.
    const std::uint32_t bits = (state & 0x807fffffu) | ((96u + (state >> 23) % 48u) << 23);
    const float x = std::bit_cast<float>(bits);
    ASSERT_EQ(float_to_half_bits(x), nearest_half(x)) << "x=" << x;
  }
}

TEST(Half, Specials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half_bits(inf), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-inf), 0xfc00);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::nanf("")))));
  EXPECT_EQ(half_bits_to_float(0x7c00), inf);
  EXPECT_TRUE(std::signbit(half_bits_to_float(0x8000)));
}

TEST(BFloat16, RoundTripsAndRounding) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = bf16_bits_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f))));
      continue;
    }
    ASSERT_EQ(float_to_bf16_bits(f), bits);
  }
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to Inf
  // Denormals are kept (bf16 shares float's exponent range).
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x00010000u)), 0x0001);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
}

TEST(Conversions, BulkMatchesScalar) {
  std::vector<float> x(100003);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 1000.0f;
  std::vector<std::uint16_t> h(x.size()), b(x.size());
  std::vector<float> back(x.size());
  float_to_half(x.data(), h.data(), x.size());
  float_to_bf16(x.data(), b.data(), x.size());
  for (std::size_t i = 0; i < x.size(); i += 97) {
    ASSERT_EQ(h[i], float_to_half_bits(x[i]));
    ASSERT_EQ(b[i], float_to_bf16_bits(x[i]));
  }
  half_to_float(h.data(), back.data(), x.size());
  for (std::size_t i = 0; i < x.size(); i += 97) ASSERT_NEAR(back[i], x[i], 0.5f);
  bf16_to_float(b.data(), back.data(), x.size());
  for (std::size_t i = 0; i < x.size(); i += 97) ASSERT_NEAR(back[i], x[i], 4.0f);
}

}  // namespace
}  // namespace sparq
