// The block codec's shared host-device math (compress/quant_math.h) on the CPU: what the CUDA
// kernels compute too, so these checks cover both sides' arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "compress/quant_math.h"
#include "core/dtype.h"
#include "core/rng.h"

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

TEST(QuantMath, StochasticRoundsDownOrUpByTheDraw) {
  const float levels = quant_levels(4);
  EXPECT_EQ(quantize_stochastic(2.25f, 1.0f, levels, 0.0f), 2 + 7);
  EXPECT_EQ(quantize_stochastic(2.25f, 1.0f, levels, 0.74f), 2 + 7);
  EXPECT_EQ(quantize_stochastic(2.25f, 1.0f, levels, 0.76f), 3 + 7);
  EXPECT_EQ(quantize_stochastic(-2.25f, 1.0f, levels, 0.2f), -3 + 7);
  EXPECT_EQ(quantize_stochastic(-2.25f, 1.0f, levels, 0.8f), -2 + 7);
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
