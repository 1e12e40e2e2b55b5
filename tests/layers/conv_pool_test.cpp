// Conv2d, MaxPool2d, AdaptiveAvgPool2d and flatten: hand-computed forward, float64 central
// differences on odd shapes, and gradient accumulation. The Winograd 3x3 path against the
// general im2col path (the reference), finite differences, and 1 vs 2 threads.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/threading.h"
#include "layer_test_util.h"
#include "layers/conv2d.h"
#include "layers/conv3x3_winograd.h"
#include "layers/pooling.h"

namespace sparq {
namespace {

using testing::expect_gradient;
using testing::random_vec;
using testing::weighted_sum;

TEST(Conv2d, HandComputedForward) {
  // 1 image, 1 channel 3x3, kernel 2x2 of ones, bias 0.5, padding 0: window sums + 0.5.
  Conv2d conv("conv", {1, 1, 2, 2, 1, 0, 1, true, 3, 3});
  ParamStore store = testing::bind_layers(conv);
  testing::copy_into(store.param("conv.weight"), {1, 1, 1, 1});
  testing::copy_into(store.param("conv.bias"), {0.5f});
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9}, y(4);
  conv.forward(testing::view(x, {1, 1, 3, 3}), testing::view(y, {1, 1, 2, 2}));
  EXPECT_EQ(y, (std::vector<float>{12.5f, 16.5f, 24.5f, 28.5f}));
  // Padding 1, stride 2, a single 1 at the kernel's centre: picks x[0,0], x[0,2], ...
  Conv2d strided("s", {1, 1, 3, 3, 2, 1, 1, false, 3, 3});
  ParamStore store2 = testing::bind_layers(strided);
  testing::copy_into(store2.param("s.weight"), {0, 0, 0, 0, 1, 0, 0, 0, 0});
  strided.forward(testing::view(x, {1, 1, 3, 3}), testing::view(y, {1, 1, 2, 2}));
  EXPECT_EQ(y, (std::vector<float>{1, 3, 7, 9}));
}

TEST(Conv2d, KernelLargerThanThePaddedInputIsRefused) {
  // 2x2 input, 3x3 kernel, stride 2, no padding: (2 - 3) / 2 + 1 rounds to 1 output row in
  // C++, though no window fits (PyTorch refuses it too).
  EXPECT_DEATH(Conv2d("big", {1, 1, 3, 3, 2, 0, 1, false, 2, 2}),
               "big: input 2x2 \\(padding 0\\) is smaller than the kernel 3x3");
  Conv2d fits("fits", {1, 1, 3, 3, 2, 1, 1, false, 2, 2});  // padded to 4x4: one window fits
}

struct ConvCase { std::int64_t n, c, h, w, k, r, s, stride, pad, dil; };

TEST(Conv2d, BackwardMatchesFiniteDifferences) {
  for (const ConvCase& cc : {ConvCase{2, 3, 5, 7, 4, 3, 3, 1, 1, 1}, ConvCase{1, 2, 7, 6, 3, 3, 2, 2, 1, 1},
                             ConvCase{2, 2, 7, 7, 2, 3, 3, 1, 2, 2}, ConvCase{2, 3, 3, 5, 5, 1, 1, 1, 0, 1}}) {
    Conv2dGeom g{cc.n, cc.c, cc.h, cc.w, cc.k, cc.r, cc.s, cc.stride, cc.stride, cc.pad, cc.pad, cc.dil, cc.dil};
    auto x = random_vec(g.n * g.c * g.h * g.w, 31), w = random_vec(g.k * g.col_rows(), 32),
         b = random_vec(g.k, 33), r = random_vec(g.n * g.k * g.col_cols(), 34);
    std::vector<double> y(r.size()), col(g.col_rows() * g.col_cols());
    auto loss = [&] {
      cpu::conv2d_forward<double>(g, x.data(), w.data(), b.data(), y.data(), col.data());
      return weighted_sum(y, r);
    };
    std::vector<double> dx(x.size(), 7.0), dw(w.size(), 0.0), db(b.size(), 0.0);
    cpu::conv2d_backward<double>(g, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data(),
                                 col.data());
    expect_gradient(loss, x, dx, "conv dx");
    expect_gradient(loss, w, dw, "conv dw");
    expect_gradient(loss, b, db, "conv db");
  }
}

TEST(Conv2d, TwoBackwardCallsAccumulate) {
  Conv2d conv("conv", {2, 3, 3, 3, 1, 1, 1, true, 5, 4});
  ParamStore store = testing::bind_layers(conv);
  auto x = testing::to_float(random_vec(2 * 2 * 20, 35)), dy = testing::to_float(random_vec(2 * 3 * 20, 36));
  std::vector<float> dx(x.size());
  const Shape xs{2, 2, 5, 4}, ys{2, 3, 5, 4};
  conv.backward(testing::view(x, xs), testing::view(dy, ys), testing::view(dx, xs));
  const auto dw1 = testing::to_vector(store.grad("conv.weight"));
  const auto dx1 = dx;
  conv.backward(testing::view(x, xs), testing::view(dy, ys), testing::view(dx, xs));
  const auto dw2 = testing::to_vector(store.grad("conv.weight"));
  for (std::size_t i = 0; i < dw1.size(); ++i) EXPECT_FLOAT_EQ(dw2[i], 2 * dw1[i]);
  EXPECT_EQ(dx, dx1);
}

// 3x3 / stride 1 / padding 1 shapes for the Winograd path, run with both tiles: odd sizes
// (partial edge tiles of either tile), 1x1 and 2x2 maps, one channel, and 31x31 maps whose 5
// images span 3 chunks with 2x2 tiles (2 images each, the last one partial) and whose 19
// images span 3 chunks with 4x4 tiles (8, 8 and 3).
std::vector<ConvCase> winograd_cases() {
  return {ConvCase{2, 3, 5, 7, 4, 3, 3, 1, 1, 1},   ConvCase{3, 5, 7, 9, 6, 3, 3, 1, 1, 1},
          ConvCase{1, 1, 1, 1, 1, 3, 3, 1, 1, 1},   ConvCase{4, 6, 2, 2, 3, 3, 3, 1, 1, 1},
          ConvCase{2, 1, 6, 3, 1, 3, 3, 1, 1, 1},   ConvCase{5, 3, 31, 31, 4, 3, 3, 1, 1, 1},
          ConvCase{19, 3, 31, 31, 4, 3, 3, 1, 1, 1}, ConvCase{2, 4, 8, 12, 5, 3, 3, 1, 1, 1}};
}

Conv2dGeom geom_of(const ConvCase& cc) {
  return Conv2dGeom{cc.n, cc.c, cc.h, cc.w, cc.k, cc.r, cc.s, cc.stride, cc.stride,
                    cc.pad, cc.pad, cc.dil, cc.dil};
}

TEST(Conv2dWinograd, AppliesOnlyTo3x3Stride1Pad1) {
  EXPECT_TRUE(cpu::winograd3x3_applies(geom_of({1, 16, 5, 5, 2, 3, 3, 1, 1, 1})));
  EXPECT_FALSE(cpu::winograd3x3_applies(geom_of({1, 3, 5, 5, 2, 3, 3, 1, 1, 1})));  // too few channels
  EXPECT_FALSE(cpu::winograd3x3_applies(geom_of({1, 16, 5, 5, 2, 3, 3, 2, 1, 1})));
  EXPECT_FALSE(cpu::winograd3x3_applies(geom_of({1, 16, 5, 5, 2, 3, 3, 1, 0, 1})));
  EXPECT_FALSE(cpu::winograd3x3_applies(geom_of({1, 16, 5, 5, 2, 3, 3, 1, 1, 2})));
  EXPECT_FALSE(cpu::winograd3x3_applies(geom_of({1, 16, 5, 5, 2, 3, 2, 1, 1, 1})));
  Conv2d fast("fast", {16, 3, 3, 3, 1, 1, 1, true, 6, 6}), other("other", {16, 3, 3, 3, 1, 0, 1, true, 6, 6});
  EXPECT_TRUE(fast.fast3x3());
  EXPECT_FALSE(other.fast3x3());
}

TEST(Conv2dWinograd, TileFollowsTheMapSize) {
  // Products per image: 4x4 tiles x 36 against 2x2 tiles x 16, the 2x2 tile on a tie.
  auto tile = [](std::int64_t h, std::int64_t w) {
    return cpu::winograd3x3_tile(geom_of({1, 16, h, w, 2, 3, 3, 1, 1, 1}));
  };
  EXPECT_EQ(tile(1, 1), 2);    // 36 > 16
  EXPECT_EQ(tile(2, 2), 2);    // 36 > 16
  EXPECT_EQ(tile(3, 3), 4);    // 36 < 64
  EXPECT_EQ(tile(4, 4), 4);    // 36 < 64
  EXPECT_EQ(tile(6, 6), 2);    // 144 = 144
  EXPECT_EQ(tile(8, 8), 4);    // 144 < 256
  EXPECT_EQ(tile(32, 2), 2);   // 8 x 36 = 288 > 16 x 16 = 256
  EXPECT_EQ(tile(32, 32), 4);
  const Conv2dGeom g = geom_of({1, 16, 8, 8, 2, 3, 3, 1, 1, 1});
  EXPECT_EQ(cpu::winograd3x3_workspace_elems(g), cpu::winograd3x3_workspace_elems(g, 4));
  EXPECT_GT(cpu::winograd3x3_workspace_elems(g, 4), cpu::winograd3x3_workspace_elems(g, 2));
  EXPECT_DEATH(cpu::winograd3x3_workspace_elems(g, 3), "tile must be 0 \\(auto\\), 2 or 4, got 3");
}

// Forward, dx, dw and db of the Winograd kernels against the general path, in double.
TEST(Conv2dWinograd, MatchesGeneralPath) {
  for (const int tile : {2, 4}) {
    for (const ConvCase& cc : winograd_cases()) {
      const Conv2dGeom g = geom_of(cc);
      auto x = random_vec(g.n * g.c * g.h * g.w, 41), w = random_vec(g.k * g.col_rows(), 42),
           b = random_vec(g.k, 43), dy = random_vec(g.n * g.k * g.col_cols(), 44);
      std::vector<double> col(cpu::conv2d_workspace_elems(g, 1)),
          work(cpu::winograd3x3_workspace_elems(g, tile));
      std::vector<double> y_ref(dy.size()), y(dy.size(), 5.0);
      cpu::conv2d_forward<double>(g, x.data(), w.data(), b.data(), y_ref.data(), col.data());
      cpu::winograd3x3_forward<double>(g, x.data(), w.data(), b.data(), y.data(), work.data(),
                                       tile);
      std::vector<double> dx_ref(x.size()), dw_ref(w.size(), 0.25), db_ref(b.size(), 0.5);
      std::vector<double> dx(x.size(), 3.0), dw(w.size(), 0.25), db(b.size(), 0.5);
      cpu::conv2d_backward<double>(g, x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(),
                                   db_ref.data(), col.data());
      cpu::winograd3x3_backward<double>(g, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                        db.data(), work.data(), tile);
      const std::string shape =
          fmt::format("{}x{}x{}x{} k={} tile={}", cc.n, cc.c, cc.h, cc.w, cc.k, tile);
      auto expect_near_all = [&](const std::vector<double>& got, const std::vector<double>& want,
                                 const char* what) {
        for (std::size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-9 * (1 + std::abs(want[i]))) << what << " " << shape << " at " << i;
        }
      };
      expect_near_all(y, y_ref, "y");
      expect_near_all(dx, dx_ref, "dx");
      expect_near_all(dw, dw_ref, "dw");
      expect_near_all(db, db_ref, "db");
    }
  }
}

TEST(Conv2dWinograd, BackwardMatchesFiniteDifferences) {
  for (const int tile : {2, 4}) {
    for (const ConvCase& cc :
         {ConvCase{2, 3, 5, 7, 4, 3, 3, 1, 1, 1}, ConvCase{1, 2, 3, 2, 3, 3, 3, 1, 1, 1}}) {
      const Conv2dGeom g = geom_of(cc);
      auto x = random_vec(g.n * g.c * g.h * g.w, 51), w = random_vec(g.k * g.col_rows(), 52),
           b = random_vec(g.k, 53), r = random_vec(g.n * g.k * g.col_cols(), 54);
      std::vector<double> y(r.size()), work(cpu::winograd3x3_workspace_elems(g, tile));
      auto loss = [&] {
        cpu::winograd3x3_forward<double>(g, x.data(), w.data(), b.data(), y.data(), work.data(),
                                         tile);
        return weighted_sum(y, r);
      };
      std::vector<double> dx(x.size()), dw(w.size(), 0.0), db(b.size(), 0.0);
      cpu::winograd3x3_backward<double>(g, x.data(), w.data(), r.data(), dx.data(), dw.data(),
                                        db.data(), work.data(), tile);
      expect_gradient(loss, x, dx, "winograd dx");
      expect_gradient(loss, w, dw, "winograd dw");
      expect_gradient(loss, b, db, "winograd db");
    }
  }
}

// The float layer: close to the general path, and the same bits with 1 and 2 threads; a map
// that takes 4x4 tiles (19 images in 3 chunks) and one that takes 2x2 tiles.
TEST(Conv2dWinograd, LayerIsCloseToGeneralPathAndThreadIndependent) {
  for (const ConvCase& cc :
       {ConvCase{19, 16, 31, 31, 4, 3, 3, 1, 1, 1}, ConvCase{5, 16, 6, 6, 24, 3, 3, 1, 1, 1}}) {
    const Conv2dGeom g = geom_of(cc);
    SCOPED_TRACE(fmt::format("{}x{} maps, tile {}", cc.h, cc.w, cpu::winograd3x3_tile(g)));
    Conv2d conv("conv", {cc.c, cc.k, 3, 3, 1, 1, 1, true, cc.h, cc.w});
    ASSERT_TRUE(conv.fast3x3());
    ParamStore store = testing::bind_layers(conv);
    auto x = testing::to_float(random_vec(g.n * g.c * g.h * g.w, 61));
    auto dy = testing::to_float(random_vec(g.n * g.k * g.col_cols(), 62));
    const Shape xs{cc.n, cc.c, cc.h, cc.w}, ys{cc.n, cc.k, cc.h, cc.w};
    struct Result { std::vector<float> y, dx, dw, db; };
    auto run = [&](int threads) {
      set_num_threads(threads);
      Result res{std::vector<float>(dy.size()), std::vector<float>(x.size()), {}, {}};
      store.zero_grads();
      conv.forward(testing::view(x, xs), testing::view(res.y, ys));
      conv.backward(testing::view(x, xs), testing::view(dy, ys), testing::view(res.dx, xs));
      res.dw = testing::to_vector(store.grad("conv.weight"));
      res.db = testing::to_vector(store.grad("conv.bias"));
      return res;
    };
    const int saved = max_threads();
    const Result one = run(1), two = run(2);
    set_num_threads(saved);
    EXPECT_EQ(one.y, two.y);
    EXPECT_EQ(one.dx, two.dx);
    EXPECT_EQ(one.dw, two.dw);
    EXPECT_EQ(one.db, two.db);
    // The general path in float on the same data.
    const auto w = testing::to_vector(store.param("conv.weight"));
    const auto b = testing::to_vector(store.param("conv.bias"));
    std::vector<float> col(cpu::conv2d_workspace_elems(g, 1)), y(dy.size()), dx(x.size()),
        dw(w.size(), 0.0f), db(b.size(), 0.0f);
    cpu::conv2d_forward<float>(g, x.data(), w.data(), b.data(), y.data(), col.data());
    cpu::conv2d_backward<float>(g, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(),
                                col.data());
    testing::expect_close(one.y.data(), y, "winograd y");
    testing::expect_close(one.dx.data(), dx, "winograd dx");
    testing::expect_close(one.dw.data(), dw, "winograd dw");
    testing::expect_close(one.db.data(), db, "winograd db");
  }
}

TEST(MaxPool2d, HandComputedForwardAndBackward) {
  MaxPool2d pool("pool", {1, 4, 4, 2, 2, 0, 1});
  std::vector<float> x{1, 5, 2, 0, 3, 4, 8, 1, 0, 0, -1, -2, 9, 0, -3, -4}, y(4), dy{1, 2, 3, 4},
      dx(16);
  pool.forward(testing::view(x, {1, 1, 4, 4}), testing::view(y, {1, 1, 2, 2}));
  EXPECT_EQ(y, (std::vector<float>{5, 8, 9, -1}));
  pool.backward(testing::view(dy, {1, 1, 2, 2}), testing::view(dx, {1, 1, 4, 4}));
  EXPECT_EQ(dx, (std::vector<float>{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 4, 0, 3, 0, 0, 0}));
}

// A NaN propagates, and the first one in scan order is the argmax, even when a later row of
// the window holds another (the device runs the same max_pool_cell).
TEST(MaxPool2d, TheFirstNanOfAWindowWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const PoolGeom g{1, 3, 3, 1, 1, 3, 1, 0};  // one 3x3 window
  std::vector<float> x{1, nan, 2, 7, 9, nan, nan, 3, 4}, y(1);
  std::vector<std::int32_t> argmax(1);
  cpu::max_pool_forward<float>(g, x.data(), y.data(), argmax.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(argmax[0], 1);
  x[1] = 0;  // now the first NaN is in the second row, after the maximum 9 so far
  cpu::max_pool_forward<float>(g, x.data(), y.data(), argmax.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(argmax[0], 5);
}

TEST(Pooling, BackwardMatchesFiniteDifferences) {
  // k3 s2 p1 on 7x5 gives 4x3 windows (3x2 left the padded last row and column unchecked).
  const PoolGeom mg{2 * 3, 7, 5, 4, 3, 3, 2, 1};
  auto x = random_vec(mg.planes * mg.h * mg.w, 37), r = random_vec(mg.planes * mg.out_h * mg.out_w, 38);
  std::vector<double> y(r.size()), dx(x.size());
  std::vector<std::int32_t> argmax(r.size());
  auto max_loss = [&] {
    cpu::max_pool_forward<double>(mg, x.data(), y.data(), argmax.data());
    return weighted_sum(y, r);
  };
  max_loss();
  cpu::max_pool_backward<double>(mg, argmax.data(), r.data(), dx.data());
  expect_gradient(max_loss, x, dx, "maxpool dx");

  const PoolGeom ag{2 * 3, 7, 5, 3, 2};
  auto avg_loss = [&] {
    cpu::avg_pool_forward<double>(ag, x.data(), y.data());
    return weighted_sum(y, r);
  };
  cpu::avg_pool_backward<double>(ag, r.data(), dx.data());
  expect_gradient(avg_loss, x, dx, "avgpool dx");
}

TEST(Pooling, GlobalAverageAndFlatten) {
  AdaptiveAvgPool2d gap("gap", 1, 1);
  std::vector<float> x{1, 2, 3, 6, 10, 20, 30, 40}, y(2), dy{4, 8}, dx(8);
  gap.forward(testing::view(x, {1, 2, 2, 2}), testing::view(y, {1, 2, 1, 1}));
  EXPECT_EQ(y, (std::vector<float>{3, 25}));
  gap.backward(testing::view(dy, {1, 2, 1, 1}), testing::view(dx, {1, 2, 2, 2}));
  EXPECT_EQ(dx, (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2}));
  const Tensor flat = flatten(testing::view(x, {2, 2, 2, 1}));
  EXPECT_EQ(flat.shape(), (Shape{2, 4}));
  EXPECT_EQ(flat.raw(), x.data());
}

}  // namespace
}  // namespace sparq
