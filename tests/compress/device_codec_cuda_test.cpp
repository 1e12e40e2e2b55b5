// Every compressor twin added with the device allreduce (fp16, bf16, randomk, qsgd, terngrad,
// signsgd, onebit) through
// the DeviceCodec interface the exchange uses, against its CPU compressor: the message bytes,
// the residual the CPU's ErrorFeedback leaves (error feedback fused), and the decodes (set
// and add) of the device's message, value for value (qsgd's, terngrad's and sign's bit for
// bit: Note [Fused decode-add], quant_math.h; the casts' and randomk's kAdd decodes and
// residuals within one float step, see expect_same_floats), for odd sizes, several world sizes,
// ranks, steps and region offsets, and randomk under a density warm-up step; and the scale checks
// of received qsgd, terngrad and sign messages. Every device buffer sits between sentinel guards.
// Label gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "compress/device_codec.h"
#include "compress/error_feedback.h"
#include "compress/span_stats.h"
#include "test_util.h"

#if SPARQ_HAS_CUDA
#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/span_stats_cuda.h"
#endif

namespace sparq::compress {
namespace {

#if SPARQ_HAS_CUDA
using sparq::testing::GuardedDeviceArray;
using testing::expect_same_floats;
using testing::make;
using testing::normal_vector;

struct TwinCase {
  std::string name;
  std::map<std::string, std::string> params;
};

void check_twin(const TwinCase& tc, std::size_t n, const EncodeContext& ctx, bool feedback) {
  SCOPED_TRACE(tc.name + " n=" + std::to_string(n) + " P=" + std::to_string(ctx.world_size) +
               " rank=" + std::to_string(ctx.rank) + (feedback ? " +ef" : "") +
               (ctx.density > 0 ? " warm-up density " + std::to_string(ctx.density) : ""));
  auto cpu = make(tc.name, tc.params);
  ASSERT_NE(cpu, nullptr);
  auto device = cpu->device_codec();
  ASSERT_NE(device, nullptr);
  const std::vector<float> g = normal_vector(n, n + 1);
  const std::vector<float> e = normal_vector(n, n + 2, 0.1f);
  Message want;
  std::vector<float> residual = e;
  if (feedback) {
    ErrorFeedback ef(residual);
    ef.encode(*cpu, g, 0, ctx, want);
  } else {
    cpu->encode(g, ctx, want);
  }
  const std::size_t capacity = device->capacity(n, ctx);
  ASSERT_EQ(capacity, want.size()) << "these messages have a fixed size";
  GuardedDeviceArray<float> dg(g), de(feedback ? e : g);
  GuardedDeviceArray<std::uint8_t> dmsg(capacity);
  GuardedDeviceArray<std::uint8_t> scratch(device->scratch_bytes(n, ctx) + 1);
  device->encode(dg.data(), feedback ? de.data() : nullptr, n, ctx, dmsg.data(), scratch.data(),
                 scratch.size(), nullptr);
  ASSERT_EQ(dmsg.download(), want);
  ASSERT_TRUE(dmsg.guards_intact() && de.guards_intact() && dg.guards_intact());
  // qsgd's sums are one fma on both devices (Note [Fused decode-add]), and terngrad's and
  // sign's products are exact: bit for bit, at alpha = 1/3, where a double rounding would show.
  const bool exact =
      tc.name == "qsgd" || tc.name == "terngrad" || tc.name == "signsgd" || tc.name == "onebit";
  expect_same_floats(de.download(), feedback ? residual : g, "residual", /*one_step=*/!exact);
  for (bool add : {false, true}) {
    const float alpha = exact ? 1.0f / 3.0f : 0.5f;
    std::vector<float> expected(n, add ? 0.25f : -1.0f);
    GuardedDeviceArray<float> dout(expected);
    cpu->decode(want, expected, alpha, add ? DecodeMode::kAdd : DecodeMode::kSet, ctx);
    device->decode(dmsg.data(), n, ctx, alpha, add, dout.data(), scratch.data(), scratch.size(),
                   nullptr, nullptr);
    expect_same_floats(dout.download(), expected, add ? "kAdd" : "kSet",
                       /*one_step=*/add && !exact);
    ASSERT_TRUE(dout.guards_intact());
  }
}

const TwinCase kTwins[] = {
    {"fp16", {}},
    {"bf16", {}},
    {"randomk", {{"density", "0.01"}}},
    {"randomk", {{"density", "0.3"}}},
    {"qsgd", {}},                                      // 7 levels, 4-bit codes, chunks of 512
    {"qsgd", {{"levels", "1"}, {"chunk", "8"}}},       // 2-bit codes, tiny chunks
    {"qsgd", {{"levels", "127"}, {"chunk", "1024"}}},  // 8-bit codes
    {"qsgd", {{"levels", "3"}, {"chunk", "24"}}},      // 3-bit codes across byte boundaries
    {"terngrad", {}},
    {"terngrad", {{"clip_sigma", "0.5"}}},  // most values clipped
    {"signsgd", {}},
    {"onebit", {}},
};

TEST(CudaDeviceCodecs, TwinsSendTheCpuBytesAndLeaveTheCpuResidual) {
  SPARQ_SKIP_WITHOUT_GPU();
  for (const TwinCase& tc : kTwins) {
    for (std::size_t n : {9, 1000, 70001}) {
      for (bool feedback : {false, true}) {
        for (int world : {1, 3}) {
          EncodeContext ctx;
          ctx.seed = 5;
          ctx.step = 3;
          ctx.bucket_id = 2;
          ctx.world_size = world;
          ctx.rank = world - 1;
          ctx.offset = 17;
          check_twin(tc, n, ctx, feedback);
        }
      }
    }
  }
}

// The density warm-up's per-step density (EncodeContext::density) changes randomk's k on
// both sides alike.
// The span-wide sums (Note [Fixed-partition sums]) over several chunks with a ragged tail:
// the device adds the CPU's doubles in the CPU's order.
TEST(CudaDeviceCodecs, SpanStatsAreTheCpuBits) {
  SPARQ_SKIP_WITHOUT_GPU();
  for (std::size_t n : {1, 15, 4096, 4097, 3 * 4096 + 35}) {
    const std::vector<float> x = normal_vector(n, n, 3.0f);
    for (const auto& [a, b] : {std::pair{StatTerm::kValue, StatTerm::kSquare},
                               std::pair{StatTerm::kAbs, StatTerm::kNone}}) {
      const SpanStats want = span_stats(x.data(), n, a, b);
      GuardedDeviceArray<float> dx(x);
      GuardedDeviceArray<std::uint8_t> scratch(cuda::span_stats_scratch_bytes(n));
      GuardedDeviceArray<SpanStats> out(1);
      cuda::span_stats(dx.data(), n, a, b, scratch.data(), out.data(), nullptr);
      const SpanStats got = out.download()[0];
      EXPECT_EQ(got.sum_a, want.sum_a) << n;
      EXPECT_EQ(got.sum_b, want.sum_b) << n;
      EXPECT_EQ(got.max_abs, want.max_abs) << n;
      EXPECT_TRUE(scratch.guards_intact() && out.guards_intact());
    }
  }
}

TEST(CudaDeviceCodecs, RandomkFollowsTheWarmUpDensity) {
  SPARQ_SKIP_WITHOUT_GPU();
  EncodeContext ctx;
  ctx.seed = 9;
  ctx.step = 1;
  ctx.world_size = 2;
  ctx.density = 0.2;
  check_twin({"randomk", {{"density", "0.01"}}}, 5003, ctx, true);
}

// Values that break naive arithmetic: zero chunks (norm 0), a subnormal norm, a norm that
// overflows f32, and a chunk whose values differ by 2^60. (NaN inputs are left out: the
// devices' NaN payloads differ from x86's, so a NaN norm's bytes need not agree.)
TEST(CudaDeviceCodecs, QsgdAgreesOnZeroTinyAndHugeChunks) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto cpu = make("qsgd", {{"chunk", "8"}});
  auto device = cpu->device_codec();
  std::vector<float> a(40, 0.0f);                   // chunk 0: all zero
  a[8] = std::numeric_limits<float>::denorm_min();  // chunk 1: a subnormal norm
  a[9] = -std::numeric_limits<float>::denorm_min();
  for (int i = 16; i < 24; ++i) a[i] = 3e38f * (i % 2 ? 1.0f : -1.0f);  // chunk 2: norm inf
  a[24] = 1e18f;  // chunk 3: one value dwarfs the other
  a[25] = 1.0f;
  for (int i = 32; i < 40; ++i) a[i] = static_cast<float>(i) - 35.5f;
  EncodeContext ctx;
  ctx.world_size = 1;
  Message want;
  cpu->encode(a, ctx, want);
  GuardedDeviceArray<float> da(a);
  GuardedDeviceArray<std::uint8_t> dmsg(want.size());
  device->encode(da.data(), nullptr, a.size(), ctx, dmsg.data(), nullptr, 0, nullptr);
  EXPECT_EQ(dmsg.download(), want);
  EXPECT_TRUE(dmsg.guards_intact());
}

// A received message (a verdict word given) whose scale check_message refuses (a negative
// qsgd chunk norm, terngrad or sign scale) decodes as nothing: zeros in kSet, no change in
// kAdd, kSparseBadScale reported unless a verdict was already there. A good one decodes as
// without the check and reports nothing.
TEST(CudaDeviceCodecs, ANegativeScaleIsRefusedAsOnTheCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  const std::size_t n = 1000;
  const TwinCase cases[] = {
      {"qsgd", {{"chunk", "64"}}}, {"terngrad", {}}, {"signsgd", {}}, {"onebit", {}}};
  for (const TwinCase& tc : cases) {
    auto cpu = make(tc.name, tc.params);
    auto device = cpu->device_codec();
    EncodeContext ctx;
    ctx.world_size = 2;
    Message good;
    cpu->encode(normal_vector(n, 3), ctx, good);
    // qsgd: the last chunk's norm (the 16th of 16); the others' one scale.
    const std::size_t at = tc.name == "qsgd" ? 4 * ((n + 63) / 64 - 1) : 0;
    for (const bool damaged : {false, true}) {
      SCOPED_TRACE(tc.name + (damaged ? " damaged" : " good"));
      Message msg = good;
      if (damaged) {
        const float minus_one = -1.0f;
        std::memcpy(msg.data() + at, &minus_one, 4);
      }
      ASSERT_EQ(cpu->check_message(msg, n, ctx).is_ok(), !damaged);
      GuardedDeviceArray<std::uint8_t> dmsg(msg);
      GuardedDeviceArray<std::uint8_t> scratch(device->scratch_bytes(n, ctx) + 1);
      for (const bool add : {false, true}) {
        for (const std::uint32_t earlier : {0u, std::uint32_t{cuda::kSparseBadIndices}}) {
          std::vector<float> want(n, 0.25f);
          if (!damaged) {
            cpu->decode(msg, want, 0.5f, add ? DecodeMode::kAdd : DecodeMode::kSet, ctx);
          } else if (!add) {
            want.assign(n, 0.0f);
          }
          GuardedDeviceArray<float> dout(std::vector<float>(n, 0.25f));
          GuardedDeviceArray<std::uint32_t> invalid(std::vector<std::uint32_t>{earlier});
          device->decode(dmsg.data(), n, ctx, 0.5f, add, dout.data(), scratch.data(),
                         scratch.size(), nullptr, invalid.data());
          expect_same_floats(dout.download(), want, add ? "kAdd" : "kSet", /*one_step=*/add);
          const std::uint32_t verdict = damaged ? cuda::kSparseBadScale : cuda::kSparseValid;
          EXPECT_EQ(invalid.download()[0], earlier != 0 ? earlier : verdict);
          ASSERT_TRUE(dout.guards_intact() && scratch.guards_intact() && invalid.guards_intact());
        }
      }
    }
  }
}
#endif

}  // namespace
}  // namespace sparq::compress
