// The twins whose message count the device chooses (topk_sampled, threshold, lbs with sampled
// selection: lbs_cuda.h's
// SparseSelection, varcount_select_cuda.h) against their CPU compressors through the
// DeviceCodec interface: the message bytes (the CPU's message is a prefix of the device's
// fixed-capacity buffer), the residual with error feedback fused, and the decodes, on inputs
// that drive the sampled rule (compress/sampled_rule.h) to its endings: a threshold taken
// from the sample, and too many kept, ending exact (magnitudes in two values; mostly zeros,
// whose sampled threshold is 0); and a threshold that keeps nothing. A received count
// outside what the selection allows is refused on the device and adds nothing. Sentinels
// guard every buffer. Label gpu.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "compress/device_codec.h"
#include "compress/error_feedback.h"
#include "test_util.h"

#if SPARQ_HAS_CUDA
#include "compress/cuda/lbs_cuda.h"
#endif

namespace sparq::compress {
namespace {

#if SPARQ_HAS_CUDA
using sparq::testing::GuardedDeviceArray;
using testing::expect_same_floats;
using testing::make;
using testing::normal_vector;

enum class Input { kNormal, kTwoMagnitudes, kMostlyZeros };

std::vector<float> input(Input kind, std::size_t n) {
  std::vector<float> v = normal_vector(n, n + 11);
  for (std::size_t i = 0; i < n; ++i) {
    if (kind == Input::kTwoMagnitudes)
      v[i] = (v[i] < 0 ? -1.0f : 1.0f) * (i % 7 == 0 ? 1.0f : 0.5f);
    if (kind == Input::kMostlyZeros && i % 400 != 0) v[i] = 0.0f;
  }
  return v;
}

void check(const std::string& name, const std::map<std::string, std::string>& params, Input kind,
           std::size_t n, bool feedback) {
  SCOPED_TRACE(name + " input " + std::to_string(static_cast<int>(kind)) +
               " n=" + std::to_string(n) + (feedback ? " +ef" : ""));
  EncodeContext ctx;
  ctx.seed = 5;
  ctx.step = 3;
  ctx.bucket_id = 2;
  ctx.world_size = 3;
  ctx.rank = 2;
  ctx.offset = 17;
  auto cpu = make(name, params);
  auto device = cpu->device_codec();
  ASSERT_NE(device, nullptr);
  const std::vector<float> g = input(kind, n);
  const std::vector<float> e(n, 0.0f);  // a = g: the input itself is what is selected from
  Message want;
  std::vector<float> residual = e;
  if (feedback) {
    ErrorFeedback ef(residual);
    ef.encode(*cpu, g, 0, ctx, want);
  } else {
    cpu->encode(g, ctx, want);
  }
  const std::size_t capacity = device->capacity(n, ctx);
  ASSERT_LE(want.size(), capacity);
  GuardedDeviceArray<float> dg(g), de(feedback ? e : g);
  GuardedDeviceArray<std::uint8_t> dmsg(capacity);
  GuardedDeviceArray<std::uint8_t> scratch(device->scratch_bytes(n, ctx));
  device->encode(dg.data(), feedback ? de.data() : nullptr, n, ctx, dmsg.data(), scratch.data(),
                 scratch.size(), nullptr);
  std::vector<std::uint8_t> got = dmsg.download();
  got.resize(want.size());
  ASSERT_EQ(got, want) << "the CPU's message, count and all";
  // topk and threshold: 0 where kept, a elsewhere; lbs: a - D(m) there, as the CPU rounds it.
  expect_same_floats(de.download(), feedback ? residual : g, "residual", /*one_step=*/true);
  for (bool add : {false, true}) {
    std::vector<float> expected(n, add ? 0.25f : -1.0f);
    GuardedDeviceArray<float> dout(expected);
    GuardedDeviceArray<std::uint32_t> invalid(std::vector<std::uint32_t>{0});
    cpu->decode(want, expected, 0.5f, add ? DecodeMode::kAdd : DecodeMode::kSet, ctx);
    device->decode(dmsg.data(), n, ctx, 0.5f, add, dout.data(), scratch.data(), scratch.size(),
                   nullptr, invalid.data());
    expect_same_floats(dout.download(), expected, add ? "kAdd" : "kSet", /*one_step=*/add);
    EXPECT_EQ(invalid.download()[0], 0u);
    EXPECT_TRUE(dout.guards_intact() && invalid.guards_intact());
  }
  // A count past what the selection allows: refused, nothing added.
  std::vector<std::uint8_t> bad = dmsg.download();
  const std::uint32_t too_many = static_cast<std::uint32_t>(n + 1);
  for (int b = 0; b < 4; ++b) bad[b] = static_cast<std::uint8_t>(too_many >> (8 * b));
  dmsg.upload(bad);
  GuardedDeviceArray<float> dout(std::vector<float>(n, 0.25f));
  GuardedDeviceArray<std::uint32_t> invalid(std::vector<std::uint32_t>{0});
  device->decode(dmsg.data(), n, ctx, 0.5f, /*add=*/true, dout.data(), scratch.data(),
                 scratch.size(), nullptr, invalid.data());
  EXPECT_EQ(invalid.download()[0], static_cast<std::uint32_t>(cuda::kSparseBadHeader));
  EXPECT_EQ(dout.download(), std::vector<float>(n, 0.25f));
  EXPECT_TRUE(dg.guards_intact() && de.guards_intact() && dmsg.guards_intact() &&
              scratch.guards_intact() && dout.guards_intact());
}
#endif

TEST(CudaCountedSparse, TopkSampledSendsTheCpuBytesOnEveryBranchOfTheRule) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  for (Input kind : {Input::kNormal, Input::kTwoMagnitudes, Input::kMostlyZeros}) {
    for (std::size_t n : {1000, 20011, 70001}) {
      for (bool feedback : {false, true})
        check("topk_sampled", {{"density", "0.01"}}, kind, n, feedback);
    }
  }
  check("topk_sampled", {{"density", "1"}}, Input::kNormal, 999, true);  // k = n: exact
#endif
}

// lbs with `selection: sampled`: the block-coded run of a count the device chose, with
// nearest and stochastic rounding (the draws addressed by bucket position, as on the CPU).
TEST(CudaCountedSparse, LbsSampledSendsTheCpuBytes) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  for (const char* rounding : {"nearest", "stochastic"}) {
    for (Input kind : {Input::kNormal, Input::kTwoMagnitudes}) {
      for (std::size_t n : {1000, 70001}) {
        for (bool feedback : {false, true}) {
          check("lbs",
                {{"density", "0.01"},
                 {"bits", "4"},
                 {"selection", "sampled"},
                 {"rounding", rounding}},
                kind, n, feedback);
        }
      }
    }
  }
#endif
}

TEST(CudaCountedSparse, ThresholdSendsTheCpuBytesEvenWhenNothingIsKept) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  for (const char* threshold : {"2.5", "0.5", "1e6"}) {
    for (std::size_t n : {9, 20011}) {
      for (bool feedback : {false, true}) {
        check("threshold", {{"threshold", threshold}}, Input::kNormal, n, feedback);
      }
    }
  }
#endif
}

}  // namespace
}  // namespace sparq::compress
