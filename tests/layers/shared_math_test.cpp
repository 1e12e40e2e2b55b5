// The per-element math that the CUDA kernels share with the CPU layers (Note: every kernel's
// per-element work is a __host__ __device__ function), checked on the CPU so that every build
// runs it, with or without CUDA: the pooling windows' gathers against the CPU scatter, the
// attention kernels' dropout draw against cpu::dropout_scales, GELU's formulas against the
// float layer, the prediction keys against std::max_element. The first three lived in the
// gpu-labelled binaries, which a CPU-only build does not make.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "layer_test_util.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/cuda/attention_dropout.h"
#include "layers/cuda/pooling_windows.h"
#include "layers/dropout.h"
#include "layers/gelu_math.h"
#include "layers/pooling.h"
#include "layers/prediction_rule.h"
#include "layers/row_predictions.h"

namespace sparq {
namespace {

using testing::same_bits;
using testing::tie_heavy;
using testing::view;

std::vector<float> rand_f(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  return testing::to_float(testing::random_vec(n, seed, scale));
}

// The device gathers of pooling_windows.h give the CPU scatter's bits (runs everywhere, so
// the device's backward arithmetic is covered without a GPU).
TEST(PoolingWindows, GathersReproduceTheCpuScatterBitForBit) {
  for (const PoolGeom& g :
       {PoolGeom{15, 11, 11, 6, 6, 3, 2, 1}, PoolGeom{6, 32, 32, 16, 16, 2, 2, 0},
        PoolGeom{4, 9, 7, 9, 7, 3, 1, 1}, PoolGeom{3, 7, 8, 4, 5, 2, 2, 1}}) {
    const auto x = tie_heavy(g.planes * g.h * g.w, 3), dy = rand_f(g.planes * g.out_h * g.out_w, 4);
    std::vector<float> y(dy.size()), dx(x.size()), gathered(x.size());
    std::vector<std::int32_t> argmax(dy.size());
    cpu::max_pool_forward<float>(g, x.data(), y.data(), argmax.data());
    cpu::max_pool_backward<float>(g, argmax.data(), dy.data(), dx.data());
    const std::int64_t cells = g.out_h * g.out_w;
    for (std::int64_t i = 0; i < g.planes * g.h * g.w; ++i) {
      const std::int64_t p = i / (g.h * g.w), iy = i % (g.h * g.w) / g.w, ix = i % g.w;
      gathered[i] =
          pooling::max_pool_dx_at(g, argmax.data() + p * cells, dy.data() + p * cells, iy, ix);
    }
    EXPECT_TRUE(same_bits(gathered, dx)) << "max pool " << g.h << "x" << g.w << " k" << g.kernel;
  }
  for (const PoolGeom& g : {PoolGeom{5, 11, 7, 3, 2}, PoolGeom{2, 5, 5, 3, 3},
                            PoolGeom{3, 9, 9, 1, 1}, PoolGeom{2, 4, 6, 4, 6}}) {
    const auto dy = rand_f(g.planes * g.out_h * g.out_w, 5);
    std::vector<float> dx(g.planes * g.h * g.w), gathered(dx.size());
    cpu::avg_pool_backward<float>(g, dy.data(), dx.data());
    const std::int64_t cells = g.out_h * g.out_w;
    for (std::int64_t i = 0; i < g.planes * g.h * g.w; ++i) {
      const std::int64_t p = i / (g.h * g.w), iy = i % (g.h * g.w) / g.w, ix = i % g.w;
      gathered[i] = pooling::avg_pool_dx_at(g, dy.data() + p * cells, iy, ix);
    }
    EXPECT_TRUE(same_bits(gathered, dx)) << "avg pool " << g.h << "x" << g.w;
  }
}

TEST(Conv2dConfig, DeterministicByDefault) { EXPECT_TRUE(Conv2d::Config{}.deterministic); }

// Runs on every machine: the device's per-element draw is the CPU's, bit for bit, from an
// offset inside a Philox block and over a length that ends inside one.
TEST(AttentionDropoutScale, EqualsTheCpuDropoutScales) {
  const DropoutKey key = DropoutKey::make({5, 1, 3, true}, 9);
  for (const float p : {0.1f, 0.3f}) {
    const std::int64_t offset = 7, n = 1001;
    std::vector<float> want(n);
    cpu::dropout_scales<float>(key, offset, n, p, want.data());
    const float keep_scale = 1.0f / (1.0f - p);
    int dropped = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float got =
          attention_dropout_scale(key.seed, key.stream, key.first + offset + i, p, keep_scale);
      ASSERT_EQ(got, want[i]) << i;
      dropped += got == 0.0f;
    }
    EXPECT_GT(dropped, 0);
  }
}

// Runs everywhere: the CPU's double loops compute exactly gelu_math.h's functions, the ones
// the CUDA kernel evaluates, so the finite-difference tests cover the device's formula; the
// float layer evaluates the same formulas with vector_math.h's tanh/erf/exp, within 1e-6 of
// them (scaled by |x| and |dy|).
TEST(GeluSharedMath, CpuLayerEvaluatesTheHostDeviceFormulas) {
  std::vector<float> x = rand_f(4099, 21, 3.0);
  for (float special : {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 88.0f, -88.0f})
    x.push_back(special);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> dy = rand_f(x.size(), 22);
  for (GeluKind kind : {GeluKind::kTanh, GeluKind::kErf}) {
    Gelu gelu(kind);
    std::vector<float> y(x.size()), dx(x.size());
    gelu.forward(view(x, {n}), view(y, {n}));
    gelu.backward(view(x, {n}), view(dy, {n}), view(dx, {n}));
    const std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end());
    std::vector<double> yd(x.size()), dxd(x.size());
    cpu::gelu_forward<double>(kind, xd.data(), yd.data(), n);
    cpu::gelu_backward<double>(kind, xd.data(), dyd.data(), dxd.data(), n);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want_y = kind == GeluKind::kTanh ? gelu_tanh(xd[i]) : gelu_erf(xd[i]);
      const double want_dx =
          kind == GeluKind::kTanh ? gelu_tanh_grad(xd[i], dyd[i]) : gelu_erf_grad(xd[i], dyd[i]);
      ASSERT_EQ(yd[i], want_y) << i;  // the double loop is the shared formula itself
      ASSERT_EQ(dxd[i], want_dx) << i;
      ASSERT_NEAR(y[i], want_y, 1e-6 * std::max(1.0, std::fabs(xd[i]))) << i;
      ASSERT_NEAR(dx[i], want_dx, 1e-6 * std::max(1.0, std::fabs(dyd[i]))) << i;
    }
  }
}

// Note [Prediction rule]: on rows without NaN the keys' maximum is std::max_element's first
// maximum, on tie-heavy rows with signed zeros and infinities; the host's two-pass form gives
// the keys' answer on those rows and on rows with NaN too. (The device's block reduction is
// held to the keys by the gpu-labelled CudaRowPredictions test.)
TEST(PredictionRule, KeysNameStdMaxElementsFirstMaximumAndTheHostFormFollows) {
  std::uint64_t state = 12345;
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>(state >> 33);
  };
  const float pool[] = {-0.0f,   0.0f,    1.0f,     -1.0f,    2.5f,      -2.5f,        1e-40f,
                        -1e-40f, 3.4e38f, -3.4e38f, INFINITY, -INFINITY, std::nanf("")};
  for (int trial = 0; trial < 3000; ++trial) {
    const std::int64_t n = 1 + next() % 97;
    const std::uint32_t choices = trial % 3 == 0 ? 12 : trial % 3 == 1 ? 6 : 13;  // 13: NaN
    std::vector<float> row(static_cast<std::size_t>(n));
    for (float& v : row) v = pool[next() % choices];
    const std::int32_t by_keys = predicted_index_by_keys(row.data(), n);
    ASSERT_EQ(predicted_index(row.data(), n), by_keys) << "trial " << trial;
    if (choices == 13) continue;
    ASSERT_EQ(by_keys, std::max_element(row.begin(), row.end()) - row.begin()) << "trial " << trial;
  }
}

// Where std::max_element lets a NaN decide (a NaN first: nothing compares greater), the rule
// skips it; a row of NaN, or an empty one, predicts 0; the real columns end the row.
TEST(PredictionRule, NanIsNeverTheMaximum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> nan_first = {nan, 1.0f, 3.0f, nan, 3.0f};
  EXPECT_EQ(predicted_index(nan_first.data(), 5), 2);
  const std::vector<float> nan_between = {-INFINITY, nan, -INFINITY};
  EXPECT_EQ(predicted_index(nan_between.data(), 3), 0);
  const std::vector<float> all_nan = {nan, nan, nan};
  EXPECT_EQ(predicted_index(all_nan.data(), 3), 0);
  EXPECT_EQ(predicted_index(all_nan.data(), 0), 0);
  const std::vector<float> padded = {1.0f, 2.0f, 9.0f};  // column 2 is padding
  EXPECT_EQ(predicted_index(padded.data(), 2), 1);
  for (const auto* row : {&nan_first, &nan_between, &all_nan}) {
    EXPECT_EQ(predicted_index_by_keys(row->data(), static_cast<std::int64_t>(row->size())),
              predicted_index(row->data(), static_cast<std::int64_t>(row->size())));
  }
  EXPECT_EQ(prediction_key(nan, 0), 0u);
  EXPECT_GT(prediction_key(-INFINITY, 0xffffffffu), 0u);
}

}  // namespace
}  // namespace sparq
