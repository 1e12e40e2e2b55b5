// Linear, Embedding, Residual, activations and Dropout: hand-computed forward values,
// float64 central differences for backward, and gradient accumulation through the f32 API.
#include <gtest/gtest.h>

#include <cmath>

#include "layer_test_util.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/residual.h"

namespace sparq {
namespace {

using testing::expect_gradient;
using testing::random_vec;
using testing::weighted_sum;

TEST(Linear, HandComputedForward) {
  Linear lin("fc", {2, 3, true});
  ParamStore store = testing::bind_layers(lin);
  testing::copy_into(store.param("fc.weight"), {1, 2, 0, -1, 3, 1});
  testing::copy_into(store.param("fc.bias"), {0.5f, -1, 2});
  std::vector<float> x{1, 2, -1, 0.5f}, y(6);
  lin.forward(testing::view(x, {2, 2}), testing::view(y, {2, 3}));
  // Row 0: [1*1+2*2, 0*1-1*2, 3*1+1*2] + b; row 1: [-1+1, 0-0.5, -3+0.5] + b.
  const std::vector<float> want{5.5f, -3, 7, 0.5f, -1.5f, -0.5f};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  for (bool bias : {true, false}) {
    const std::int64_t n = 3, in = 5, out = 7;
    auto x = random_vec(n * in, 1), w = random_vec(out * in, 2), b = random_vec(out, 3),
         r = random_vec(n * out, 4);
    std::vector<double> y(n * out);
    auto loss = [&] {
      cpu::linear_forward<double>(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), n, in, out);
      return weighted_sum(y, r);
    };
    std::vector<double> dx(n * in, 42.0), dw(out * in, 0.0), db(out, 0.0);
    cpu::linear_backward<double>(x.data(), w.data(), r.data(), dx.data(), dw.data(),
                                 bias ? db.data() : nullptr, n, in, out);
    expect_gradient(loss, x, dx, "dx");
    expect_gradient(loss, w, dw, "dw");
    if (bias) expect_gradient(loss, b, db, "db");
  }
}

TEST(Linear, TwoBackwardCallsAccumulateParamsAndOverwriteInput) {
  Linear lin("fc", {4, 3, true});
  ParamStore store = testing::bind_layers(lin);
  auto x = testing::to_float(random_vec(8, 5)), dy = testing::to_float(random_vec(6, 6));
  std::vector<float> dx(8);
  lin.backward(testing::view(x, {2, 4}), testing::view(dy, {2, 3}), testing::view(dx, {2, 4}));
  const auto dw1 = testing::to_vector(store.grad("fc.weight"));
  const auto db1 = testing::to_vector(store.grad("fc.bias"));
  const auto dx1 = dx;
  lin.backward(testing::view(x, {2, 4}), testing::view(dy, {2, 3}), testing::view(dx, {2, 4}));
  const auto dw2 = testing::to_vector(store.grad("fc.weight"));
  const auto db2 = testing::to_vector(store.grad("fc.bias"));
  for (std::size_t i = 0; i < dw1.size(); ++i) EXPECT_FLOAT_EQ(dw2[i], 2 * dw1[i]);
  for (std::size_t i = 0; i < db1.size(); ++i) EXPECT_FLOAT_EQ(db2[i], 2 * db1[i]);
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_FLOAT_EQ(dx[i], dx1[i]);
  EXPECT_EQ(store.range_of(lin.param_names()).count,
            store.entry("fc.bias").offset + 3 - store.entry("fc.weight").offset);
}

TEST(Linear, ShapeMismatchNamesLayerAndArgument) {
  Linear lin("h.0.mlp.fc", {4, 3, true});
  ParamStore store = testing::bind_layers(lin);
  std::vector<float> x(10), y(6);
  EXPECT_DEATH(lin.forward(testing::view(x, {2, 5}), testing::view(y, {2, 3})),
               "h.0.mlp.fc: x has shape \\[2, 5\\], last dim must be 4");
}

TEST(Activations, HandComputedForward) {
  std::vector<float> x{-1, 0, 2}, y(3);
  Relu().forward(testing::view(x, {3}), testing::view(y, {3}));
  EXPECT_EQ(y, (std::vector<float>{0, 0, 2}));
  // NaN passes through, as in PyTorch; it became 0, hiding a NaN from the loss (review).
  std::vector<float> nan_in{std::nanf(""), -1.0f}, nan_out(2);
  Relu().forward(testing::view(nan_in, {2}), testing::view(nan_out, {2}));
  EXPECT_TRUE(std::isnan(nan_out[0]));
  EXPECT_EQ(nan_out[1], 0.0f);
  Gelu(GeluKind::kErf).forward(testing::view(x, {3}), testing::view(y, {3}));
  // x * Phi(x): Phi(-1) = 0.158655, Phi(2) = 0.977250.
  EXPECT_NEAR(y[0], -0.158655f, 1e-5);
  EXPECT_NEAR(y[2], 1.954500f, 1e-5);
  Gelu(GeluKind::kTanh).forward(testing::view(x, {3}), testing::view(y, {3}));
  EXPECT_NEAR(y[0], -0.158808f, 1e-5);  // 0.5*(-1)*(1+tanh(0.797885*(-1.044715)))
  EXPECT_NEAR(y[2], 1.954598f, 1e-5);
  Tanh().forward(testing::view(x, {3}), testing::view(y, {3}));
  EXPECT_NEAR(y[2], 0.964028f, 1e-6);
}

TEST(Activations, BackwardMatchesFiniteDifferences) {
  const std::int64_t n = 29;
  auto x = random_vec(n, 7, 2.0), r = random_vec(n, 8);
  std::vector<double> y(n), dx(n);
  for (GeluKind kind : {GeluKind::kTanh, GeluKind::kErf}) {
    cpu::gelu_backward<double>(kind, x.data(), r.data(), dx.data(), n);
    expect_gradient([&] { cpu::gelu_forward<double>(kind, x.data(), y.data(), n); return weighted_sum(y, r); },
                    x, dx, "gelu dx");
  }
  cpu::relu_forward<double>(x.data(), y.data(), n);
  cpu::relu_backward<double>(y.data(), r.data(), dx.data(), n);
  expect_gradient([&] { cpu::relu_forward<double>(x.data(), y.data(), n); return weighted_sum(y, r); },
                  x, dx, "relu dx");
  cpu::tanh_forward<double>(x.data(), y.data(), n);
  cpu::tanh_backward<double>(y.data(), r.data(), dx.data(), n);
  expect_gradient([&] { cpu::tanh_forward<double>(x.data(), y.data(), n); return weighted_sum(y, r); },
                  x, dx, "tanh dx");
}

TEST(Dropout, MaskIsReproducibleScaledAndRegeneratedInBackward) {
  const std::int64_t n = 10007;
  Dropout drop("drop", 0.25f, 3);
  std::vector<float> x(n, 1.0f), y(n), y2(n), dy(n, 2.0f), dx(n);
  const DropoutStep step{11, 0, 5, true};
  drop.forward(testing::view(x, {n}), testing::view(y, {n}), step);
  drop.forward(testing::view(x, {n}), testing::view(y2, {n}), step);
  EXPECT_EQ(y, y2);
  drop.backward(testing::view(dy, {n}), testing::view(dx, {n}), step);
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(y[i] == 0.0f || std::fabs(y[i] - 1.0f / 0.75f) < 1e-6) << i;
    ASSERT_FLOAT_EQ(dx[i], 2.0f * y[i]) << i;  // same mask, same scale
    // Each element is the documented Philox draw.
    const bool keep = uniform_at(11, make_stream(RngPurpose::kDropout, 0, 3), (5ull << 40) + i) >= 0.25f;
    ASSERT_EQ(keep, y[i] != 0.0f) << i;
    kept += keep;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.02);
  // Another step draws a different mask; eval mode is the identity.
  drop.forward(testing::view(x, {n}), testing::view(y2, {n}), {11, 0, 6, true});
  EXPECT_NE(y, y2);
  drop.forward(testing::view(x, {n}), testing::view(y2, {n}), {11, 0, 5, false});
  EXPECT_EQ(y2, x);
}

TEST(Dropout, MasksDoNotRepeatAfter2To24Steps) {
  // first = step << 40 wraps at 2^24 steps: step 2^24 + 5 drew step 5's mask (review). Each
  // further 2^24 steps now draw under another key; steps below 2^24 keep theirs.
  const std::uint64_t wrap = 1ull << 24;
  EXPECT_EQ(DropoutKey::make({11, 0, 5, true}, 3).seed, 11u);
  EXPECT_EQ(DropoutKey::make({11, 0, wrap - 1, true}, 3).seed, 11u);
  const std::int64_t n = 4099;
  Dropout drop("drop", 0.5f, 3);
  std::vector<float> x(n, 1.0f), early(n), late(n), later(n);
  drop.forward(testing::view(x, {n}), testing::view(early, {n}), {11, 0, 5, true});
  drop.forward(testing::view(x, {n}), testing::view(late, {n}), {11, 0, wrap + 5, true});
  drop.forward(testing::view(x, {n}), testing::view(later, {n}), {11, 0, 2 * wrap + 5, true});
  EXPECT_NE(early, late);
  EXPECT_NE(late, later);
  EXPECT_NE(early, later);
}

TEST(Embedding, LookupScatterAddAndPositions) {
  Embedding emb("wte", {4, 2});
  ParamStore store = testing::bind_layers(emb);
  testing::copy_into(store.param("wte.weight"), {0, 1, 10, 11, 20, 21, 30, 31});
  std::vector<std::int32_t> ids{2, 0, 2};
  const Tensor id_view(ids.data(), DType::kI32, {3});
  std::vector<float> y(6), dy{1, 2, 3, 4, 5, 6};
  emb.forward(id_view, testing::view(y, {3, 2}));
  EXPECT_EQ(y, (std::vector<float>{20, 21, 0, 1, 20, 21}));
  emb.backward(id_view, testing::view(dy, {3, 2}));
  emb.backward(id_view, testing::view(dy, {3, 2}));  // accumulates
  EXPECT_EQ(testing::to_vector(store.grad("wte.weight")),
            (std::vector<float>{6, 8, 0, 0, 12, 16, 0, 0}));
  // Positions: batch 2, seq 3 adds rows 0..2 to each batch row.
  store.zero_grads();
  std::vector<float> h(12, 1.0f), dh(12, 1.0f);
  emb.forward_positions(testing::view(h, {2, 3, 2}), /*accumulate=*/true);
  EXPECT_EQ(h[4], 21.0f);
  EXPECT_EQ(h[10], 21.0f);
  emb.backward_positions(testing::view(dh, {2, 3, 2}));
  // Rows 0..2 were read by both batch rows; row 3 by none.
  const auto position_grads = testing::to_vector(store.grad("wte.weight"));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(position_grads[i], i < 6 ? 2.0f : 0.0f) << i;
  ids[1] = 4;
  EXPECT_DEATH(emb.forward(id_view, testing::view(y, {3, 2})), "wte: id 4 at position 1 is outside");
  // A table padded past its vocabulary: ids in the padding rows are refused.
  Embedding padded("padded", {4, 2, 0.02f, 3});
  ParamStore padded_store = testing::bind_layers(padded);
  ids[1] = 3;
  EXPECT_DEATH(padded.forward(id_view, testing::view(y, {3, 2})),
               "padded: id 3 at position 1 is outside \\[0, 3\\)");
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  const std::int64_t n = 7, dim = 5, num = 4;
  std::vector<std::int32_t> ids{1, 3, 1, 0, 1, 2, 3};
  auto table = random_vec(num * dim, 9), r = random_vec(n * dim, 10);
  std::vector<double> y(n * dim), dtable(num * dim, 0.0);
  cpu::embedding_backward<double>(ids.data(), r.data(), dtable.data(), n, dim);
  expect_gradient([&] {
    cpu::embedding_forward<double>(ids.data(), table.data(), y.data(), n, dim, false);
    return weighted_sum(y, r);
  }, table, dtable, "dtable");
}

TEST(Residual, BackwardJoinsTheBranchGradientIntoTheSkip) {
  Residual res("h.0.residual");
  std::vector<float> a{1, 2}, b{3, 4}, y(2), dy{5, 6}, dbranch{0.5f, -2}, dx{9, 9};
  res.forward(testing::view(a, {2}), testing::view(b, {2}), testing::view(y, {2}));
  EXPECT_EQ(y, (std::vector<float>{4, 6}));
  res.backward(testing::view(dy, {2}), testing::view(dbranch, {2}), testing::view(dx, {2}));
  EXPECT_EQ(dx, (std::vector<float>{5.5f, 4}));  // overwritten: the 9s are not read
  // In place, as the models call it: the stream's gradient becomes dx.
  res.backward(testing::view(dy, {2}), testing::view(dbranch, {2}), testing::view(dy, {2}));
  EXPECT_EQ(dy, dx);
  std::vector<float> short_branch(1);
  EXPECT_DEATH(res.backward(testing::view(dy, {2}), testing::view(short_branch, {1}),
                            testing::view(dx, {2})),
               "h.0.residual: dy .* and dbranch .* differ in size");
}

}  // namespace
}  // namespace sparq
