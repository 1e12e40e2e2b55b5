#include <gtest/gtest.h>

#include <cmath>

#include "compress/dgc.h"
#include "compress/error_feedback.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

TEST(Dgc, MomentumCorrectionMaskingAndMass) {
  const std::size_t n = 4000;
  auto made = testing::make("dgc", {{"density", "0.01"}, {"momentum", "0.5"}});
  auto& c = dynamic_cast<DgcCompressor&>(*made);
  std::vector<float> residual(n, 0.0f), u(n, 0.0f);
  ErrorFeedback ef(residual);
  for (int step = 0; step < 4; ++step) {
    const auto g = testing::normal_vector(n, 60 + step);
    const std::vector<float> before = residual;
    for (std::size_t i = 0; i < n; ++i) u[i] = 0.5f * u[i] + g[i];  // the reference momentum
    EncodeContext ctx;
    ctx.step = step;
    Message msg;
    ef.encode(c, g, 0, ctx, msg);
    const auto d = decode_dense(c, msg, n, ctx);
    std::size_t sent = 0;
    for (std::size_t i = 0; i < n; ++i) {
      // decoded + new residual == corrected gradient + old residual
      ASSERT_NEAR(d[i] + residual[i], u[i] + before[i], 1e-5f * (1.0f + std::fabs(u[i])));
      if (d[i] != 0.0f) {
        ++sent;
        EXPECT_EQ(residual[i], 0.0f) << "sent entries leave the accumulator";
        EXPECT_EQ(c.momentum_state()[i], 0.0f) << "momentum factor masking";
        u[i] = 0.0f;
      } else {
        EXPECT_FLOAT_EQ(c.momentum_state()[i], u[i]);
      }
    }
    EXPECT_EQ(sent, 40u);
  }
  std::vector<std::uint8_t> state;
  c.save_state(state);
  auto other = testing::make("dgc", {{"density", "0.01"}, {"momentum", "0.5"}});
  ASSERT_TRUE(other->load_state(state).is_ok());
  std::vector<std::uint8_t> again;
  other->save_state(again);
  EXPECT_EQ(state, again);
}

// A rank's non-finite step sends its bucket as zeros without error feedback (Note
// [Non-finite local gradients], gradient_exchange.h): the step is skipped, and the momentum
// must stay as it was. Masking at the k "largest" of the zeros wiped momentum that was never
// sent (review, 2026-12-06); the CUDA twin masks only on its error-feedback path.
TEST(Dgc, AnEncodeWithoutErrorFeedbackLeavesTheMomentum) {
  const std::size_t n = 8;
  auto made = testing::make("dgc", {{"density", "0.25"}, {"momentum", "0.5"}});
  auto& c = dynamic_cast<DgcCompressor&>(*made);
  std::vector<float> residual(n, 0.0f);
  ErrorFeedback ef(residual);
  const std::vector<float> g = {0.1f, 0.2f, 0.3f, 0.4f, 5.0f, 6.0f, 7.0f, 8.0f};
  Message msg;
  ef.encode(c, g, 0, EncodeContext{}, msg);
  const std::vector<float> momentum(c.momentum_state().begin(), c.momentum_state().end());
  ASSERT_EQ(momentum[0], 0.1f) << "an entry not sent keeps its momentum";
  ASSERT_EQ(momentum[7], 0.0f) << "a sent entry's momentum is masked";
  const std::vector<float> zeros(n, 0.0f);
  c.encode(zeros, EncodeContext{.step = 1}, msg);
  EXPECT_EQ(std::vector<float>(c.momentum_state().begin(), c.momentum_state().end()), momentum);
}

TEST(Dgc, SparsityWarmupRampsExponentiallyFromAQuarter) {
  auto made = testing::make("dgc", {{"density", "0.001"}, {"warmup_steps", "4"}});
  auto& c = dynamic_cast<DgcCompressor&>(*made);
  EXPECT_DOUBLE_EQ(c.density_at(0), 0.25);
  EXPECT_NEAR(c.density_at(1), 0.25 * std::pow(0.004, 0.25), 1e-12);
  EXPECT_NEAR(c.density_at(2), 0.25 * std::pow(0.004, 0.5), 1e-12);
  EXPECT_DOUBLE_EQ(c.density_at(4), 0.001);
  EXPECT_DOUBLE_EQ(c.density_at(100), 0.001);
}

TEST(Dgc, LocalClippingBoundsTheAccumulatedNorm) {
  const std::size_t n = 1000;
  auto c = testing::make("dgc", {{"density", "0.5"}, {"momentum", "0"}, {"clip_norm", "2"}});
  std::vector<float> e(n, 0.0f);
  const auto g = testing::normal_vector(n, 3);  // norm ~ 31.6
  EncodeContext ctx;
  ctx.world_size = 4;
  c->accumulate(g, e, ctx);
  EXPECT_NEAR(std::sqrt(testing::squared_norm(e)), 2.0 / std::sqrt(4.0), 1e-4);
}

TEST(Dgc, BadKeysAreRejected) {
  CompressConfig config{"dgc", {{"momentum", "1.5"}}, "compress"};
  auto r = make_compressor(config);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("compress.momentum"), std::string::npos);
  config.params = {{"warmup_steps", "-1"}};
  r = make_compressor(config);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("compress.warmup_steps"), std::string::npos);
}

}  // namespace
}  // namespace sparq::compress
