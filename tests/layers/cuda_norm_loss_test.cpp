// CUDA LayerNorm, VocabBias and CrossEntropy against their CPU twins (the same layer in a CPU
// context): odd shapes, forward and backward, guard bands on every device output, and the
// parameter-gradient accumulation rule; the rows' predictions (scoring) against the host's.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda_layer_test_util.h"
#include "layers/cross_entropy.h"
#include "layers/layer_norm.h"
#include "layers/row_predictions.h"
#include "layers/vocab_bias.h"

namespace sparq {
namespace {

#if SPARQ_HAS_CUDA
using testing::GuardedDeviceArray;
using testing::normalized_error;
using testing::random_floats;

TEST(CudaLayerNorm, ForwardAndBackwardMatchCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  // 3 x 37 rows; widths below, at and well above one warp's stride, none a multiple of 32
  // but 48's tail; 3000 rows exceeds the reduction's 64 chunks of 32 rows.
  struct Case { std::int64_t rows, c; };
  for (const Case k : {Case{3 * 37, 48}, Case{3 * 37, 771}, Case{3000, 29}}) {
    LayerNorm cpu_ln("ln", {k.c, 1e-5f, k.rows}), gpu_ln("ln", {k.c, 1e-5f, k.rows});
    ParamStore cpu_store = testing::bind_in(ExecContext::cpu(), cpu_ln);
    ParamStore gpu_store = testing::bind_in(*ctx, gpu_ln);
    testing::randomize_both(cpu_store, gpu_store, 7);
    const Shape s{k.rows, k.c};
    auto x = random_floats(k.rows * k.c, 21, 3.0), dy = random_floats(k.rows * k.c, 22);
    for (float& v : x) v += 2.0f;  // a mean away from zero: the two-pass variance matters
    std::vector<float> y(x.size()), dx(x.size());
    cpu_ln.forward(testing::view(x, s), testing::view(y, s));
    cpu_ln.backward(testing::view(x, s), testing::view(dy, s), testing::view(dx, s));

    GuardedDeviceArray<float> gx(x), gdy(dy), gy(x.size()), gdx(x.size());
    testing::uploads_done();
    gpu_ln.forward(gx.view(s), gy.view(s));
    EXPECT_EQ(gpu_ln.mean().device(), Device::kCUDA);
    // Statistics in double and the same float expressions: a few ulps apart at most.
    EXPECT_LT(normalized_error(gy.download(), y), 1e-6) << k.c;
    EXPECT_LT(normalized_error(testing::download(gpu_ln.mean()), testing::to_vector(cpu_ln.mean())), 1e-6);
    EXPECT_LT(normalized_error(testing::download(gpu_ln.rstd()), testing::to_vector(cpu_ln.rstd())), 1e-6);
    gpu_ln.backward(gx.view(s), gdy.view(s), gdx.view(s));
    // Row sums and column sums in another (fixed) order, with cancellation in dx.
    EXPECT_LT(normalized_error(gdx.download(), dx), 1e-5) << k.c;
    EXPECT_LT(testing::grad_error(gpu_store, cpu_store), 1e-5) << k.c;
    EXPECT_TRUE(gy.guards_intact());
    EXPECT_TRUE(gdx.guards_intact());
  }
}

TEST(CudaVocabBias, ForwardAndBackwardMatchCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  for (const std::int64_t rows : {std::int64_t{3 * 37}, std::int64_t{2502}}) {
    const std::int64_t vocab = 101;
    VocabBias cpu_bias("mlm.decoder", vocab), gpu_bias("mlm.decoder", vocab);
    ParamStore cpu_store = testing::bind_in(ExecContext::cpu(), cpu_bias);
    ParamStore gpu_store = testing::bind_in(*ctx, gpu_bias);
    testing::randomize_both(cpu_store, gpu_store, 8);
    const Shape s{3, rows / 3, vocab};
    auto logits = random_floats(rows * vocab, 23), dlogits = random_floats(rows * vocab, 24);
    GuardedDeviceArray<float> gl(logits), gdl(dlogits);
    testing::uploads_done();
    cpu_bias.forward(testing::view(logits, s));
    gpu_bias.forward(gl.view(s));
    EXPECT_EQ(gl.download(), logits);  // one float add per element: identical
    cpu_bias.backward(testing::view(dlogits, s));
    gpu_bias.backward(gdl.view(s));
    // Column sums over the rows in chunks: another fixed order.
    EXPECT_LT(testing::grad_error(gpu_store, cpu_store), 1e-6) << rows;
    EXPECT_EQ(gdl.download(), dlogits);  // only read
    EXPECT_TRUE(gl.guards_intact());
    EXPECT_TRUE(gdl.guards_intact());
  }
}

// Targets over the valid vocabulary 101 of a padded width 128, every 5th row ignored.
std::vector<std::int32_t> lm_targets(std::int64_t n, std::int64_t valid, bool all_ignored) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    t[i] = all_ignored || i % 5 == 2 ? -100 : static_cast<std::int32_t>((i * 37 + 11) % valid);
  }
  t[0] = static_cast<std::int32_t>(valid - 1);  // the last valid column
  if (all_ignored) t[0] = -100;
  return t;
}

TEST(CudaCrossEntropy, FusedLossAndGradientMatchCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  // The second shape takes the per-row kernel past one block's 256 columns and the target
  // count past its 1024 threads (only the first ran: review, 2026-12-07).
  struct Shape {
    std::int64_t n, v, valid;
  };
  for (const auto [n, v, valid] : {Shape{3 * 37, 128, 101}, Shape{1100, 1000, 997}}) {
    for (const bool all_ignored : {false, true}) {
      for (const bool in_place : {false, true}) {
        CrossEntropy cpu_ce("loss", {v, valid, -100, n}), gpu_ce("loss", {v, valid, -100, n});
        gpu_ce.bind_context(*ctx);
        const auto t = lm_targets(n, valid, all_ignored);
        auto logits = random_floats(n * v, 25, 4.0);
        std::vector<float> dl(logits.size());
        GuardedDeviceArray<std::int32_t> gt(t);
        GuardedDeviceArray<float> glogits(logits), gdl(logits.size());
        testing::uploads_done();
        const Tensor ht(const_cast<std::int32_t*>(t.data()), DType::kI32, {n});
        const float want = cpu_ce.forward_backward(testing::view(logits, {n, v}), ht,
                                                   testing::view(dl, {n, v}), 1.5f);
        const Tensor gout = in_place ? glogits.view({n, v}) : gdl.view({n, v});
        const float got = gpu_ce.forward_backward(glogits.view({n, v}), gt.view({n}), gout, 1.5f);
        EXPECT_EQ(gpu_ce.counted(), cpu_ce.counted());
        // Per-row float losses are a few ulps apart; their mean is summed in double.
        EXPECT_NEAR(got, want, 1e-6 * std::max(1.0f, std::fabs(want))) << all_ignored;
        if (all_ignored) {
          EXPECT_EQ(got, 0.0f);
        }
        EXPECT_LT(normalized_error(testing::download(gpu_ce.row_losses()),
                                   testing::to_vector(cpu_ce.row_losses())),
                  1e-6);
        // exp and the row sum in another fixed order; padded columns and ignored rows exact 0.
        const auto gdlogits = in_place ? glogits.download() : gdl.download();
        EXPECT_LT(normalized_error(gdlogits, dl), 1e-5) << in_place;
        for (std::int64_t i = 0; i < n; ++i) {
          for (std::int64_t j = 0; j < v; ++j) {
            if (t[i] != -100 && j < valid) continue;
            ASSERT_EQ(gdlogits[i * v + j], 0.0f) << i << " " << j;
          }
        }
        EXPECT_TRUE(glogits.guards_intact());
        EXPECT_TRUE(gdl.guards_intact());
        // Forward only: the same loss, logits untouched when not in place.
        if (!in_place) {
          EXPECT_NEAR(gpu_ce.forward(glogits.view({n, v}), gt.view({n})), got, 1e-7);
          EXPECT_EQ(glogits.download(), logits);
        }
        // Bound back to the CPU, the layer's buffers follow: its CPU path wrote the row losses
        // through the device buffer (review, 2026-12-07).
        gpu_ce.bind_context(ExecContext::cpu());
        EXPECT_EQ(gpu_ce.forward(testing::view(logits, {n, v}), ht),
                  cpu_ce.forward(testing::view(logits, {n, v}), ht));
      }
    }
  }
}

// Note [Prediction rule]: the device's block reduction names each row's prediction exactly
// as the host's fold does, on rows full of ties, signed zeros, infinities and NaN (a whole
// NaN row too), widths below and above one block's stride, and a padded tail never chosen.
TEST(CudaRowPredictions, EqualTheHostsOnTiesAndNan) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[] = {0.0f, -0.0f, 1.0f, 1.0f, -1.0f, INFINITY, -INFINITY, nan};
  struct Case {
    std::int64_t rows, width, real;
  };
  for (const Case k :
       {Case{37, 7, 7}, Case{5, 1000, 999}, Case{3, 50304, 50257}, Case{64, 257, 1}}) {
    std::vector<float> logits(static_cast<std::size_t>(k.rows * k.width));
    std::uint64_t state = static_cast<std::uint64_t>(k.width);
    for (float& v : logits) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = pool[(state >> 33) % 8];
    }
    std::fill(logits.begin(), logits.begin() + k.width, nan);  // a row without a number
    for (std::int64_t r = 0; r < k.rows; ++r) {                // the padded tail's values would win
      for (std::int64_t j = k.real; j < k.width; ++j) logits[r * k.width + j] = 1e30f;
    }
    std::vector<std::int32_t> want(static_cast<std::size_t>(k.rows)), got(want.size(), -7);
    Buffer scratch;
    row_predictions(testing::view(logits, {k.rows, k.width}), k.real, want.data(),
                    ExecContext::cpu(), scratch);
    GuardedDeviceArray<float> glogits(logits);
    testing::uploads_done();
    row_predictions(glogits.view({k.rows, k.width}), k.real, got.data(), *ctx, scratch);
    EXPECT_EQ(got, want) << k.rows << "x" << k.width;
    EXPECT_EQ(want[0], 0);
    EXPECT_EQ(glogits.download(), logits);  // read only
    EXPECT_TRUE(glogits.guards_intact());
  }
}

TEST(CudaCrossEntropy, RefusesAPaddedColumnAsTarget) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  CrossEntropy ce("ce", {3, 2, -100, 3});
  ce.bind_context(*ctx);
  GuardedDeviceArray<float> logits(std::vector<float>(9, 0.0f));
  GuardedDeviceArray<std::int32_t> t(std::vector<std::int32_t>{0, -100, 2});
  testing::uploads_done();
  EXPECT_DEATH(ce.forward(logits.view({3, 3}), t.view({3})),
               "ce: target 2 at row 2 is outside \\[0, 2\\)");
}
#endif

}  // namespace
}  // namespace sparq
