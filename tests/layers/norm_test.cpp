// LayerNorm and BatchNorm2d: hand-computed forward, float64 central differences, running
// statistics and gradient accumulation.
#include <gtest/gtest.h>

#include <cmath>

#include "layer_test_util.h"
#include "layers/batch_norm.h"
#include "layers/layer_norm.h"

namespace sparq {
namespace {

using testing::expect_gradient;
using testing::random_vec;
using testing::weighted_sum;

TEST(LayerNorm, HandComputedForward) {
  LayerNorm ln("ln", {4, 0.0001f, 2});
  ParamStore store = testing::bind_layers(ln);
  testing::copy_into(store.param("ln.weight"), {1, 2, 1, 1});
  testing::copy_into(store.param("ln.bias"), {0, 0, 0, 1});
  // Row [1, 2, 3, 4]: mean 2.5, var 1.25, rstd = 1/sqrt(1.2501).
  std::vector<float> x{1, 2, 3, 4, 5, 5, 5, 5}, y(8);
  ln.forward(testing::view(x, {2, 4}), testing::view(y, {2, 4}));
  const float rs = 1.0f / std::sqrt(1.2501f);
  EXPECT_NEAR(y[0], -1.5f * rs, 1e-6);
  EXPECT_NEAR(y[1], -1.0f * rs, 1e-6);
  EXPECT_NEAR(y[3], 1.5f * rs + 1, 1e-6);
  EXPECT_NEAR(y[4], 0.0f, 1e-6);  // constant row: centred to zero
  EXPECT_NEAR(ln.mean().data<float>()[0], 2.5f, 1e-6);
  EXPECT_NEAR(ln.rstd().data<float>()[1], 100.0f, 1e-3);
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const std::int64_t rows = 5, c = 11;
  auto x = random_vec(rows * c, 11, 2.0), g = random_vec(c, 12), b = random_vec(c, 13),
       r = random_vec(rows * c, 14);
  std::vector<double> y(rows * c), mean(rows), rstd(rows);
  auto loss = [&] {
    cpu::layer_norm_forward<double>(x.data(), g.data(), b.data(), y.data(), mean.data(),
                                    rstd.data(), rows, c, 1e-5);
    return weighted_sum(y, r);
  };
  loss();
  std::vector<double> dx(rows * c), dg(c, 0.0), db(c, 0.0);
  cpu::layer_norm_backward<double>(x.data(), g.data(), mean.data(), rstd.data(), r.data(),
                                   dx.data(), dg.data(), db.data(), rows, c);
  expect_gradient(loss, x, dx, "dx");
  expect_gradient(loss, g, dg, "dgamma");
  expect_gradient(loss, b, db, "dbeta");
}

TEST(LayerNorm, TwoBackwardCallsAccumulate) {
  LayerNorm ln("ln", {6, 1e-5f, 3});
  ParamStore store = testing::bind_layers(ln);
  auto x = testing::to_float(random_vec(18, 15)), dy = testing::to_float(random_vec(18, 16));
  std::vector<float> y(18), dx(18), dx_first;
  ln.forward(testing::view(x, {3, 6}), testing::view(y, {3, 6}));
  ln.backward(testing::view(x, {3, 6}), testing::view(dy, {3, 6}), testing::view(dx, {3, 6}));
  const auto dg1 = testing::to_vector(store.grad("ln.weight"));
  dx_first = dx;
  ln.backward(testing::view(x, {3, 6}), testing::view(dy, {3, 6}), testing::view(dx, {3, 6}));
  const auto dg2 = testing::to_vector(store.grad("ln.weight"));
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(dg2[i], 2 * dg1[i]);
  EXPECT_EQ(dx, dx_first);
}

TEST(BatchNorm2d, HandComputedTrainingForwardAndRunningStats) {
  BatchNorm2d bn("bn", {1, 1e-5f, 0.1f});
  ParamStore store = testing::bind_layers(bn);
  testing::copy_into(store.param("bn.weight"), {2});
  testing::copy_into(store.param("bn.bias"), {1});
  // One channel, values 1..4: mean 2.5, biased var 1.25, unbiased 5/3.
  std::vector<float> x{1, 2, 3, 4}, y(4);
  bn.forward(testing::view(x, {2, 1, 1, 2}), testing::view(y, {2, 1, 1, 2}), true);
  const float is = 1.0f / std::sqrt(1.25f + 1e-5f);
  EXPECT_NEAR(y[0], 2 * (-1.5f) * is + 1, 1e-5);
  EXPECT_NEAR(y[3], 2 * (1.5f) * is + 1, 1e-5);
  EXPECT_NEAR(bn.running_mean().data<float>()[0], 0.25f, 1e-6);
  EXPECT_NEAR(bn.running_var().data<float>()[0], 0.9f + 0.1f * 5.0f / 3.0f, 1e-6);
  // Eval uses the running statistics.
  bn.forward(testing::view(x, {2, 1, 1, 2}), testing::view(y, {2, 1, 1, 2}), false);
  const float rv = 0.9f + 0.1f * 5.0f / 3.0f;
  EXPECT_NEAR(y[0], 2 * (1 - 0.25f) / std::sqrt(rv + 1e-5f) + 1, 1e-5);
}

TEST(BatchNorm2d, TrainingOnOneValuePerChannelIsRefusedEvalIsNot) {
  // Batch statistics of one value would make the output beta whatever x is (CUDA refused it
  // already; now both devices do).
  BatchNorm2d bn("bn", {1, 1e-5f, 0.1f});
  ParamStore store = testing::bind_layers(bn);
  std::vector<float> x{3}, y(1);
  EXPECT_DEATH(bn.forward(testing::view(x, {1, 1, 1, 1}), testing::view(y, {1, 1, 1, 1}), true),
               "bn: training needs more than one value per channel");
  bn.forward(testing::view(x, {1, 1, 1, 1}), testing::view(y, {1, 1, 1, 1}), false);
  EXPECT_TRUE(std::isfinite(y[0]));
}

TEST(BatchNorm2d, BackwardMatchesFiniteDifferencesInBothModes) {
  const std::int64_t n = 3, c = 2, hw = 5;
  for (bool training : {true, false}) {
    auto x = random_vec(n * c * hw, 17, 1.5), g = random_vec(c, 18), b = random_vec(c, 19),
         r = random_vec(n * c * hw, 20);
    std::vector<double> y(x.size()), mean(c), invstd(c), rm{0.2, -0.1}, rv{1.5, 0.7};
    auto loss = [&] {
      std::vector<double> rm_copy = rm, rv_copy = rv;  // the update must not leak between calls
      cpu::batch_norm_forward<double>(x.data(), g.data(), b.data(), y.data(), mean.data(),
                                      invstd.data(), rm_copy.data(), rv_copy.data(), n, c, hw,
                                      1e-5, 0.1, training);
      return weighted_sum(y, r);
    };
    loss();
    std::vector<double> dx(x.size()), dg(c, 0.0), db(c, 0.0);
    cpu::batch_norm_backward<double>(x.data(), g.data(), mean.data(), invstd.data(), r.data(),
                                     dx.data(), dg.data(), db.data(), n, c, hw, training);
    const std::string mode = training ? "train " : "eval ";
    expect_gradient(loss, x, dx, mode + "dx");
    expect_gradient(loss, g, dg, mode + "dgamma");
    expect_gradient(loss, b, db, mode + "dbeta");
  }
}

TEST(BatchNorm2d, TwoBackwardCallsAccumulate) {
  BatchNorm2d bn("bn", {3});
  ParamStore store = testing::bind_layers(bn);
  auto x = testing::to_float(random_vec(24, 21)), dy = testing::to_float(random_vec(24, 22));
  std::vector<float> y(24), dx(24);
  const Shape s{2, 3, 2, 2};
  bn.forward(testing::view(x, s), testing::view(y, s), true);
  bn.backward(testing::view(x, s), testing::view(dy, s), testing::view(dx, s));
  const auto dg1 = testing::to_vector(store.grad("bn.weight"));
  const auto db1 = testing::to_vector(store.grad("bn.bias"));
  const auto dx1 = dx;
  bn.backward(testing::view(x, s), testing::view(dy, s), testing::view(dx, s));
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(store.grad("bn.weight").data<float>()[i], 2 * dg1[i]);
    EXPECT_FLOAT_EQ(store.grad("bn.bias").data<float>()[i], 2 * db1[i]);
  }
  EXPECT_EQ(dx, dx1);
}

}  // namespace
}  // namespace sparq
