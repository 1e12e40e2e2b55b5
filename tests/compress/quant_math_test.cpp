// The block codec's shared host-device math (compress/quant_math.h) on the CPU: what the CUDA
// kernels compute too, so these checks cover both sides' arithmetic.
#include "compress/quant_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "compress/randomk_positions.h"
#include "compress/span_stats.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/threading.h"

namespace sparq::compress {
namespace {

TEST(QuantMath, NearestRoundsToTheClosestLevelAndClamps) {
  for (int bits : {2, 3, 4, 8}) {
    const float levels = quant_levels(bits);
    EXPECT_EQ(levels, static_cast<float>((1 << (bits - 1)) - 1));
    for (int i = -4000; i <= 4000; ++i) {
      const float y = static_cast<float>(i) / 997.0f * levels;  // in units of the scale
      const int q = static_cast<int>(std::floor(std::clamp(y, -levels, levels) + 0.5f));
      ASSERT_EQ(quantize_nearest(y, 1.0f, levels), static_cast<std::uint8_t>(q + levels)) << y;
    }
    EXPECT_EQ(quantize_nearest(1e9f, 1.0f, levels), static_cast<std::uint8_t>(2 * levels));
    EXPECT_EQ(quantize_nearest(-1e9f, 1.0f, levels), 0);
  }
}

// Note [Fused decode-add]: the decode-add rounds once, whatever the compiler contracts.
TEST(QuantMath, DecodeAddIsOneFusedMultiplyAdd) {
  const float levels = quant_levels(4), f = 0.1f / 3.0f;
  int rounded_differently = 0;
  for (int code = 0; code <= 14; ++code) {
    for (const float y : {0.25f, -1.7f, 3.0e-3f, 123.456f}) {
      const auto c = static_cast<std::uint8_t>(code);
      const float want = std::fma(static_cast<float>(code) - levels, f, y);
      EXPECT_EQ(dequantize_add(y, c, levels, f), want) << code << " " << y;
      // volatile: the two roundings a contraction-free compiler would make
      volatile float product = dequantize(c, levels, f);
      rounded_differently += (y + product) != want;
    }
  }
  EXPECT_GT(rounded_differently, 0) << "no case where one rounding differs from two";
}

TEST(QuantMath, StochasticRoundsDownOrUpByTheDraw) {
  const float levels = quant_levels(4);
  EXPECT_EQ(quantize_stochastic(2.25f, 1.0f, levels, 0.0f), 2 + 7);
  EXPECT_EQ(quantize_stochastic(2.25f, 1.0f, levels, 0.74f), 2 + 7);
  EXPECT_EQ(quantize_stochastic(2.25f, 1.0f, levels, 0.76f), 3 + 7);
  EXPECT_EQ(quantize_stochastic(-2.25f, 1.0f, levels, 0.2f), -3 + 7);
  EXPECT_EQ(quantize_stochastic(-2.25f, 1.0f, levels, 0.8f), -2 + 7);
  // At y = L, y + u rounds up to L + 1 for u within half an ulp of 1: capped at 2L. A zero
  // (padding, structurally zero rows) is code L for every draw: (0 + L) + u used to round up
  // to L + 1 there, decoding a zero as +scale (review, 2026-12-05).
  for (const float top_level : {1.0f, 3.0f, 7.0f, 127.0f}) {
    EXPECT_EQ(quantize_stochastic(top_level, 1.0f, top_level, 1.0f - 0x1p-24f), 2 * top_level)
        << top_level;
    for (const float u : {0.0f, 0.5f, 1.0f - 0x1p-23f, 1.0f - 0x1p-24f}) {
      EXPECT_EQ(quantize_stochastic(0.0f, 1.0f, top_level, u), top_level) << top_level << " " << u;
      EXPECT_EQ(quantize_stochastic(-0.0f, 1.0f, top_level, u), top_level) << top_level << " " << u;
    }
  }
}

TEST(QuantMath, NanAndInfinityGiveTheDocumentedCodesAndScales) {
  const float levels = quant_levels(4);
  EXPECT_EQ(quantize_nearest(std::numeric_limits<float>::quiet_NaN(), 1.0f, levels), 0);
  EXPECT_EQ(absmax_step(1.0f, std::numeric_limits<float>::quiet_NaN()), 1.0f);
  EXPECT_EQ(absmax_step(1.0f, -3.0f), 3.0f);
  EXPECT_EQ(block_scale_bits(std::numeric_limits<float>::infinity(), levels), 0x7bff);
  EXPECT_EQ(block_scale_bits(0.0f, levels), 0);
  EXPECT_EQ(inverse_scale(0.0f), 0.0f);
}

TEST(QuantMath, RoundingDrawsAreThePhiloxSequence) {
  for (std::uint64_t pos : {0ull, 1ull, 3ull, 4ull, 1000003ull}) {
    EXPECT_EQ(rounding_uniform(9, 17, pos), uniform_at(9, 17, pos)) << pos;
  }
}

TEST(QuantMath, CodeGroupsPackLittleEndianAndUnpack) {
  for (int bits = 2; bits <= 8; ++bits) {
    std::uint8_t codes[8];
    for (int i = 0; i < 8; ++i) codes[i] = static_cast<std::uint8_t>((5 * i + 3) & ((1 << bits) - 1));
    for (int count = 1; count <= 8; ++count) {
      const std::uint64_t word = pack_code_group(codes, count, bits);
      EXPECT_LT(word, count * bits == 64 ? ~0ull : (1ull << (count * bits))) << bits;
      for (int i = 0; i < count; ++i) EXPECT_EQ(unpack_code(word, i, bits), codes[i]);
    }
  }
  const std::uint8_t two[2] = {0x3, 0xA};
  EXPECT_EQ(pack_code_group(two, 2, 4), 0xA3u);
}

// qsgd_code: the level floor(s |x| / norm + u) capped at s, signed around s; the tiny-norm
// branch divides; NaN lands on the top level instead of an undefined conversion.
TEST(QuantMath, QsgdCodeRoundsTheScaledMagnitudeByTheDraw) {
  const float s = 7.0f, norm = 3.0f, ratio = s / norm;
  for (int i = -3000; i <= 3000; ++i) {
    const float x = static_cast<float>(i) / 1000.0f;
    for (const float u : {0.0f, 0.25f, 0.5f, 0.999f}) {
      const float y = std::fabs(x) * ratio;
      const float level = std::min(std::floor(std::min(y, s) + u), s);
      const int want = static_cast<int>((x < 0.0f ? -level : level) + s);
      ASSERT_EQ(qsgd_code(x, ratio, false, norm, s, u), want) << x << " " << u;
    }
  }
  // |x| above the norm (impossible for a real chunk, possible for a hostile one): level s.
  EXPECT_EQ(qsgd_code(10.0f, ratio, false, norm, s, 0.9f), 2 * s);
  EXPECT_EQ(qsgd_code(-10.0f, ratio, false, norm, s, 0.9f), 0);
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(qsgd_code(tiny, s / tiny, true, tiny, s, 0.0f), 2 * s);
  EXPECT_EQ(qsgd_code(std::numeric_limits<float>::quiet_NaN(), ratio, false, norm, s, 0.5f), 2 * s);
  // 127 levels and a draw just below 1 round 127 + u up to 128 in f32: still capped at s.
  EXPECT_EQ(qsgd_code(1.0f, 127.0f, false, 1.0f, 127.0f, 0.99999994f), 254);
}

// randomk's positions: one per stratum [j n / k, (j + 1) n / k), drawn by Philox word j.
TEST(QuantMath, RandomkPositionsAreOnePerStratumFromPhiloxWordJ) {
  for (const auto& [n, k] :
       {std::pair<std::size_t, std::size_t>{1000, 10}, {1003, 7}, {64, 64}, {5, 1}}) {
    std::size_t previous = 0;
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t lo = j * n / k, hi = (j + 1) * n / k;
      const std::size_t pos = randomk_position(n, k, j, 11, 12);
      ASSERT_EQ(pos, lo + random_u32_at(11, 12, j) % (hi - lo));
      ASSERT_TRUE(pos >= lo && pos < hi);
      if (j > 0) {
        ASSERT_GT(pos, previous);
      }
      previous = pos;
    }
  }
}

// Note [Fixed-partition sums], written out plainly: what the CPU and the CUDA twin must both
// compute, whatever the thread count.
TEST(SpanStats, FollowTheFixedPartitionOnAnyThreadCount) {
  // Sizes past 4 chunks take the parallel path; the sums are checked on NaN-free data (a NaN
  // made both sides NaN and hid the chunking: review, 2026-12-05), the maximum again with a NaN.
  for (std::size_t n : {1, 17, 4096, 4097, 5 * 4096 + 100, 9 * 4096 + 7}) {
    std::vector<float> x(n);
    fill_normal(x.data(), n, 0.5f, 2.0f, n, 3);
    double want_a = 0, want_b = 0;
    float want_max = 0;
    for (std::size_t c = 0; c * kStatChunk < n; ++c) {
      const std::size_t begin = c * kStatChunk, len = std::min(kStatChunk, n - begin);
      double lanes_a[kStatLanes] = {}, lanes_b[kStatLanes] = {};
      const std::size_t full = len / kStatLanes * kStatLanes;
      for (std::size_t i = 0; i < full; ++i) {
        lanes_a[i % kStatLanes] += x[begin + i];
        lanes_b[i % kStatLanes] += static_cast<double>(x[begin + i]) * x[begin + i];
      }
      double chunk_a = 0, chunk_b = 0;
      for (std::size_t l = 0; l < kStatLanes; ++l) chunk_a += lanes_a[l], chunk_b += lanes_b[l];
      for (std::size_t i = full; i < len; ++i) {
        chunk_a += x[begin + i];
        chunk_b += static_cast<double>(x[begin + i]) * x[begin + i];
      }
      want_a += chunk_a;
      want_b += chunk_b;
      for (std::size_t i = 0; i < len; ++i) want_max = std::fmax(want_max, std::fabs(x[begin + i]));
    }
    ASSERT_TRUE(std::isfinite(want_a) && std::isfinite(want_b)) << n;
    float want_max_without_20 = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (i != 20) want_max_without_20 = std::fmax(want_max_without_20, std::fabs(x[i]));
    }
    std::vector<float> with_nan = x;
    if (n > 20) with_nan[20] = std::numeric_limits<float>::quiet_NaN();  // the maximum skips it
    for (int threads : {1, 2, 3, 4}) {
      set_num_threads(threads);
      const SpanStats got = span_stats(x.data(), n, StatTerm::kValue, StatTerm::kSquare);
      EXPECT_EQ(got.sum_a, want_a) << n << " threads " << threads;
      EXPECT_EQ(got.sum_b, want_b) << n << " threads " << threads;
      EXPECT_EQ(got.max_abs, want_max) << n << " threads " << threads;
      const SpanStats nan_got = span_stats(with_nan.data(), n, StatTerm::kValue, StatTerm::kSquare);
      if (n > 20) {
        EXPECT_TRUE(std::isnan(nan_got.sum_a)) << n << " threads " << threads;
      }
      EXPECT_EQ(nan_got.max_abs, want_max_without_20) << n << " threads " << threads;
    }
    set_num_threads(1);
  }
  // The scales: terngrad's min(max |a|, clip sigma), signsgd's mean |a|, onebit's RMS.
  const float v[4] = {1.0f, -3.0f, 2.0f, -2.0f};
  const SpanStats terms = span_stats(v, 4, StatTerm::kValue, StatTerm::kSquare);
  EXPECT_EQ(terngrad_scale(terms, 4, 100.0), 3.0f);  // the clip is loose: max |a|
  EXPECT_FLOAT_EQ(terngrad_scale(terms, 4, 0.5), 0.5f * std::sqrt(4.5f - 0.25f));  // mean -0.5
  EXPECT_EQ(sign_scale(span_stats(v, 4, StatTerm::kAbs, StatTerm::kNone), 4, false), 2.0f);
  EXPECT_FLOAT_EQ(sign_scale(span_stats(v, 4, StatTerm::kSquare, StatTerm::kNone), 4, true),
                  std::sqrt(4.5f));
}

TEST(QuantMath, HalfConversionsAreDtypes) {
  for (float x : {0.0f, 1.0f, -2.5f, 6.1e-5f, 3.0e-7f, 65504.0f, 70000.0f, 1e-9f}) {
    EXPECT_EQ(half_bits_of(x), float_to_half_bits(x)) << x;
    EXPECT_EQ(bf16_bits_of(x), float_to_bf16_bits(x)) << x;
  }
  EXPECT_EQ(half_bits_round_up(1.0f + 1e-4f), 0x3c01);  // just above 1: the next f16
  EXPECT_EQ(half_bits_round_up(1.0f), 0x3c00);
}

}  // namespace
}  // namespace sparq::compress
