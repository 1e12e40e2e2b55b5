// dgc's CUDA twin (compress/dgc_device_codec.cpp) against DgcCompressor under ErrorFeedback,
// over several steps so that the momentum carries: the message bytes, the residual and the
// momentum (through save_state, in the CPU's format) after every step, with and without
// local clipping and the sparsity warm-up, and without error feedback (plain top-k); decodes
// set and add; error feedback's input measured as ||u + e||^2, as the CPU's; the momentum loaded
// into a fresh twin comes back the same, and so after a later prepare(). Each case runs on a
// twin grown by its encodes and on one prepare()d for the bucket first, as the exchange does
// (the saved momentum is still the CPU's extent). Device buffers sit between sentinel guards.
// Label gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "compress/device_codec.h"
#include "compress/error_feedback.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

#if SPARQ_HAS_CUDA
using sparq::testing::GuardedDeviceArray;
using testing::expect_same_floats;
using testing::make;
using testing::normal_vector;

void check_dgc(std::size_t n, const std::string& clip, const std::string& warmup, bool feedback,
               bool prepared) {
  SCOPED_TRACE("n=" + std::to_string(n) + " clip_norm=" + clip + " warmup_steps=" + warmup +
               (feedback ? " +ef" : "") + (prepared ? " prepared" : ""));
  auto cpu = make("dgc", {{"density", "0.02"}, {"clip_norm", clip}, {"warmup_steps", warmup}});
  ASSERT_NE(cpu, nullptr);
  auto device = cpu->device_codec();
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->has_state());
  constexpr std::size_t kOffset = 7;  // the span's place in its bucket (ctx.offset below)
  if (prepared) device->prepare(kOffset + n + 5, feedback);  // the bucket ends 5 past the span
  std::vector<float> residual = normal_vector(n, n + 2, 0.1f);
  GuardedDeviceArray<float> de(residual);
  // The exchange's measurement of error feedback's input, which dgc rewrites as ||u + e||^2.
  GuardedDeviceArray<std::uint8_t> input(sizeof(SpanStats));
  if (feedback) device->set_input_measurement(reinterpret_cast<SpanStats*>(input.data()));
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    EncodeContext ctx;
    ctx.seed = 5;
    ctx.step = step;
    ctx.world_size = 2;
    ctx.rank = 1;
    ctx.offset = kOffset;
    const std::vector<float> g = normal_vector(n, 100 * n + step);
    Message want;
    double input_sq = 0;
    if (feedback) {
      ErrorFeedback ef(residual);
      ef.encode(*cpu, g, 0, ctx, want);
      input_sq = ef.input_sq();
    } else {
      cpu->encode(g, ctx, want);
    }
    GuardedDeviceArray<float> dg(g);
    const std::size_t capacity = device->capacity(n, ctx);
    ASSERT_GE(capacity, want.size());
    GuardedDeviceArray<std::uint8_t> dmsg(capacity);
    GuardedDeviceArray<std::uint8_t> scratch(device->scratch_bytes(n, ctx) + 1);
    device->encode(dg.data(), feedback ? de.data() : nullptr, n, ctx, dmsg.data(), scratch.data(),
                   scratch.size(), nullptr);
    std::vector<std::uint8_t> got = dmsg.download();
    got.resize(want.size());  // the rest of the capacity is slack the header excludes
    ASSERT_EQ(got, want);
    ASSERT_TRUE(dmsg.guards_intact() && de.guards_intact() && dg.guards_intact());
    if (feedback) {
      ASSERT_EQ(de.download(), residual);  // a = e + u exactly; 0 where kept, on both sides
      SpanStats measured;
      const std::vector<std::uint8_t> bytes = input.download();
      std::memcpy(&measured, bytes.data(), sizeof(measured));
      EXPECT_NEAR(measured.sum_a, input_sq, 1e-9 * input_sq) << "||a||^2, a = u + e";
      ASSERT_TRUE(input.guards_intact());
    }
    std::vector<std::uint8_t> cpu_state, device_state;
    cpu->save_state(cpu_state);
    device->save_state(device_state);
    ASSERT_EQ(device_state, cpu_state) << "the momentum";
    for (bool add : {false, true}) {
      std::vector<float> expected(n, add ? 0.25f : -1.0f);
      GuardedDeviceArray<float> dout(expected);
      cpu->decode(want, expected, 0.5f, add ? DecodeMode::kAdd : DecodeMode::kSet, ctx);
      device->decode(dmsg.data(), n, ctx, 0.5f, add, dout.data(), scratch.data(), scratch.size(),
                     nullptr, nullptr);
      expect_same_floats(dout.download(), expected, add ? "kAdd" : "kSet", /*one_step=*/add);
      ASSERT_TRUE(dout.guards_intact());
    }
  }
  // A checkpoint's momentum, loaded into a fresh twin, is the same momentum.
  std::vector<std::uint8_t> saved, reloaded;
  cpu->save_state(saved);
  auto fresh = cpu->device_codec();
  ASSERT_TRUE(fresh->load_state(saved).is_ok());
  fresh->save_state(reloaded);
  EXPECT_EQ(reloaded, saved);
  fresh->prepare(2 * (kOffset + n), feedback);  // a larger bucket keeps the loaded momentum
  fresh->save_state(reloaded);
  EXPECT_EQ(reloaded, saved) << "after prepare()";
  EXPECT_FALSE(fresh->load_state(std::vector<std::uint8_t>(3)).is_ok()) << "not f32";
}
#endif

TEST(CudaDgc, StepsSendTheCpuBytesAndKeepTheCpuMomentum) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  for (std::size_t n : {60, 1000, 70001}) {
    for (const char* clip : {"0", "0.5"}) {
      for (const char* warmup : {"0", "3"}) {
        for (bool prepared : {false, true}) check_dgc(n, clip, warmup, /*feedback=*/true, prepared);
      }
    }
    for (bool prepared : {false, true}) check_dgc(n, "0", "0", /*feedback=*/false, prepared);
  }
#endif
}

}  // namespace
}  // namespace sparq::compress
