// TiedHeadLoss (the fused tied head + cross-entropy) against a float64 loop of the unfused
// math.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/gemm.h"
#include "core/threading.h"
#include "layers/layer_test_util.h"
#include "layers/tied_head_loss.h"

namespace sparq {
namespace {

// A head problem: x [n, c], table [v, c], bias [v], targets (some ignored), valid < v.
struct HeadCase {
  std::int64_t n, c, v, valid;
  std::vector<float> x, table, bias;
  std::vector<std::int32_t> targets;
  HeadCase(std::int64_t rows = 13, std::int64_t dim = 7, std::int64_t vocab = 24,
           std::int64_t valid_vocab = 21)
      : n(rows), c(dim), v(vocab), valid(valid_vocab) {
    x = testing::to_float(testing::random_vec(n * c, 1, 1.0));
    table = testing::to_float(testing::random_vec(v * c, 2, 0.7));
    bias = testing::to_float(testing::random_vec(v, 3, 0.5));
    for (std::int64_t i = 0; i < n; ++i) {
      targets.push_back(i % 4 == 1 ? -100 : static_cast<std::int32_t>((i * 5 + 3) % valid));
    }
  }
};

struct HeadResult {
  double loss = 0;
  std::vector<float> dx, dtable, dbias;
  std::vector<std::int32_t> predictions;
};

// The unfused math in float64: logits, log-softmax over the valid columns, the mean over
// counted rows, and its gradients (added to the starting dtable/dbias).
HeadResult reference(const HeadCase& h, bool with_bias, const std::vector<float>& dtable0,
                     const std::vector<float>& dbias0) {
  HeadResult r;
  r.dx.assign(h.n * h.c, 0.0f);
  std::vector<double> dtable(dtable0.begin(), dtable0.end()), dbias(dbias0.begin(), dbias0.end());
  std::int64_t count = 0;
  for (const auto t : h.targets) count += t != -100;
  for (std::int64_t i = 0; i < h.n; ++i) {
    r.predictions.push_back(-1);
    if (h.targets[i] == -100) continue;
    std::vector<double> z(h.valid);
    for (std::int64_t j = 0; j < h.valid; ++j) {
      double acc = with_bias ? h.bias[j] : 0.0;
      for (std::int64_t k = 0; k < h.c; ++k) acc += double(h.x[i * h.c + k]) * h.table[j * h.c + k];
      z[j] = acc;
    }
    double mx = z[0];
    std::int64_t arg = 0;
    for (std::int64_t j = 1; j < h.valid; ++j) {
      if (z[j] > mx) mx = z[j], arg = j;
    }
    r.predictions.back() = static_cast<std::int32_t>(arg);
    double sum = 0;
    for (const double zj : z) sum += std::exp(zj - mx);
    r.loss += (std::log(sum) + mx - z[h.targets[i]]) / static_cast<double>(count);
    for (std::int64_t j = 0; j < h.valid; ++j) {
      const double g =
          (std::exp(z[j] - mx) / sum - (j == h.targets[i])) / static_cast<double>(count);
      for (std::int64_t k = 0; k < h.c; ++k) {
        r.dx[i * h.c + k] += static_cast<float>(g * h.table[j * h.c + k]);
        dtable[j * h.c + k] += g * h.x[i * h.c + k];
      }
      dbias[j] += g;
    }
  }
  r.dtable.assign(dtable.begin(), dtable.end());
  r.dbias.assign(dbias.begin(), dbias.end());
  return r;
}

// The fused layer on the case, with `chunk_rows` and `threads`; dtable/dbias start from the
// given values (the layer accumulates).
HeadResult fused(HeadCase h, bool with_bias, std::int64_t chunk_rows, int threads,
                 const std::vector<float>& dtable0, const std::vector<float>& dbias0) {
  set_num_threads(threads);
  TiedHeadLoss head("head", {h.v, h.valid, h.c, -100, h.n, chunk_rows});
  HeadResult r;
  r.dx.assign(h.n * h.c, 123.0f);  // overwritten, ignored rows included
  r.dtable = dtable0;
  r.dbias = dbias0;
  TiedHeadLoss::Operands ops{
      testing::view(h.table, {h.v, h.c}), testing::view(r.dtable, {h.v, h.c}), {}, {}};
  if (with_bias) {
    ops.bias = testing::view(h.bias, {h.v});
    ops.dbias = testing::view(r.dbias, {h.v});
  }
  const Tensor targets(h.targets.data(), DType::kI32, {h.n});
  r.loss = head.forward_backward(testing::view(h.x, {h.n, h.c}), ops, targets,
                                 testing::view(r.dx, {h.n, h.c}));
  r.predictions = head.predictions();
  EXPECT_EQ(head.counted(), 10);  // 13 rows, every fourth from row 1 ignored
  set_num_threads(1);
  return r;
}

TEST(TiedHeadLoss, MatchesTheUnfusedMathInFloat64) {
  const HeadCase h;
  const auto dtable0 = testing::to_float(testing::random_vec(h.v * h.c, 4, 0.1));
  const auto dbias0 = testing::to_float(testing::random_vec(h.v, 5, 0.1));
  for (const bool with_bias : {false, true}) {
    const HeadResult want = reference(h, with_bias, dtable0, dbias0);
    // Chunks of 3 counted rows (gathered: ignored rows break contiguity), and one chunk.
    for (const std::int64_t chunk : {3, 0}) {
      const HeadResult got = fused(h, with_bias, chunk, 1, dtable0, dbias0);
      const std::string what =
          "bias " + std::to_string(with_bias) + " chunk " + std::to_string(chunk);
      EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << what;
      testing::expect_close(got.dx.data(), want.dx, what + " dx");
      testing::expect_close(got.dtable.data(), want.dtable, what + " dtable");
      testing::expect_close(got.dbias.data(), with_bias ? want.dbias : dbias0, what + " dbias");
      EXPECT_EQ(got.predictions, want.predictions) << what;
      // The padded rows of the table get nothing: exactly their starting values.
      for (std::int64_t j = h.valid * h.c; j < h.v * h.c; ++j) {
        ASSERT_EQ(got.dtable[j], dtable0[j]) << what << " element " << j;
      }
      // Ignored rows get a zero input gradient.
      for (std::int64_t i = 1; i < h.n; i += 4) {
        for (std::int64_t k = 0; k < h.c; ++k) ASSERT_EQ(got.dx[i * h.c + k], 0.0f) << what;
      }
    }
  }
}

// The head's own parallel loops must not depend on the thread count. Run on Eigen, the GEMM
// backend whose bits do not either (a BLAS's may: Note [GEMM backends] in core/gemm.h).
TEST(TiedHeadLoss, OneAndTwoThreadsGiveTheSameBitsOnEigen) {
  const GemmBackend saved = gemm_backend();
  set_gemm_backend(GemmBackend::kEigen);
  HeadCase h(300, 16, 640, 600);  // large enough for the parallel row loop and several chunks
  const std::vector<float> dtable0(h.v * h.c, 0.0f), dbias0(h.v, 0.0f);
  const auto run = [&](int threads) {
    set_num_threads(threads);
    HeadResult r;
    r.dx.assign(h.n * h.c, 0.0f);
    r.dtable = dtable0;
    r.dbias = dbias0;
    TiedHeadLoss head("head", {h.v, h.valid, h.c, -100, h.n, 64});
    const TiedHeadLoss::Operands ops{testing::view(h.table, {h.v, h.c}),
                                     testing::view(r.dtable, {h.v, h.c}),
                                     testing::view(h.bias, {h.v}), testing::view(r.dbias, {h.v})};
    const Tensor targets(h.targets.data(), DType::kI32, {h.n});
    r.loss = head.forward_backward(testing::view(h.x, {h.n, h.c}), ops, targets,
                                   testing::view(r.dx, {h.n, h.c}));
    set_num_threads(1);
    return r;
  };
  const HeadResult one = run(1), two = run(2);
  set_gemm_backend(saved);
  EXPECT_EQ(one.loss, two.loss);
  EXPECT_EQ(std::memcmp(one.dx.data(), two.dx.data(), one.dx.size() * 4), 0);
  EXPECT_EQ(std::memcmp(one.dtable.data(), two.dtable.data(), one.dtable.size() * 4), 0);
  EXPECT_EQ(std::memcmp(one.dbias.data(), two.dbias.data(), one.dbias.size() * 4), 0);
}

TEST(TiedHeadLoss, ForwardGivesTheLossAndPredictionsOfForwardBackward) {
  HeadCase h;
  TiedHeadLoss head("head", {h.v, h.valid, h.c, -100, h.n, 4});
  std::vector<float> dtable(h.v * h.c, 0.0f), dx(h.n * h.c);
  const TiedHeadLoss::Operands ops{
      testing::view(h.table, {h.v, h.c}), testing::view(dtable, {h.v, h.c}), {}, {}};
  const Tensor targets(h.targets.data(), DType::kI32, {h.n});
  const float loss = head.forward(testing::view(h.x, {h.n, h.c}), ops, targets);
  const auto predictions = head.predictions();
  EXPECT_EQ(loss, head.forward_backward(testing::view(h.x, {h.n, h.c}), ops, targets,
                                        testing::view(dx, {h.n, h.c})));
  EXPECT_EQ(predictions, head.predictions());
}

// Note [Prediction rule]: a NaN logit is never the prediction, and a row of NaN predicts 0
// (it predicted the last valid column until 2026-12-05; the review found no test of it).
TEST(TiedHeadLoss, PredictionsSkipNanAndARowOfNanPredictsZero) {
  const auto predictions_with_first_bias = [](float first_bias) {
    HeadCase h;
    for (std::int64_t k = 0; k < h.c; ++k) h.x[k] = std::nanf("");  // row 0 (counted): all NaN
    h.bias[0] = first_bias;                                         // column 0 of every row
    TiedHeadLoss head("head", {h.v, h.valid, h.c, -100, h.n, 4});
    std::vector<float> dtable(h.v * h.c, 0.0f), dbias(h.v, 0.0f);
    const TiedHeadLoss::Operands ops{testing::view(h.table, {h.v, h.c}),
                                     testing::view(dtable, {h.v, h.c}),
                                     testing::view(h.bias, {h.v}), testing::view(dbias, {h.v})};
    const Tensor targets(h.targets.data(), DType::kI32, {h.n});
    head.forward(testing::view(h.x, {h.n, h.c}), ops, targets);
    return head.predictions();
  };
  const std::vector<std::int32_t> nan_first = predictions_with_first_bias(std::nanf(""));
  EXPECT_EQ(nan_first[0], 0);
  // Column 0 NaN predicts as column 0 at -infinity: the first real maximum among the others.
  EXPECT_EQ(nan_first, predictions_with_first_bias(-INFINITY));
  for (std::size_t i = 1; i < nan_first.size(); ++i) EXPECT_NE(nan_first[i], 0) << "row " << i;
}

TEST(TiedHeadLoss, NoCountedRowGivesZeroLossAndGradient) {
  HeadCase h;
  std::fill(h.targets.begin(), h.targets.end(), -100);
  TiedHeadLoss head("head", {h.v, h.valid, h.c, -100, h.n, 0});
  std::vector<float> dtable(h.v * h.c, 0.5f), dx(h.n * h.c, 9.0f);
  const TiedHeadLoss::Operands ops{
      testing::view(h.table, {h.v, h.c}), testing::view(dtable, {h.v, h.c}), {}, {}};
  const Tensor targets(h.targets.data(), DType::kI32, {h.n});
  EXPECT_EQ(head.forward_backward(testing::view(h.x, {h.n, h.c}), ops, targets,
                                  testing::view(dx, {h.n, h.c})),
            0.0f);
  for (const float g : dx) ASSERT_EQ(g, 0.0f);
  for (const float g : dtable) ASSERT_EQ(g, 0.5f);
}

TEST(TiedHeadLoss, RefusesATargetOutsideTheValidColumns) {
  HeadCase h;
  h.targets[5] = static_cast<std::int32_t>(h.valid);  // a padded column
  TiedHeadLoss head("lm_head", {h.v, h.valid, h.c, -100, h.n, 0});
  std::vector<float> dtable(h.v * h.c, 0.0f);
  const TiedHeadLoss::Operands ops{
      testing::view(h.table, {h.v, h.c}), testing::view(dtable, {h.v, h.c}), {}, {}};
  const Tensor targets(h.targets.data(), DType::kI32, {h.n});
  EXPECT_DEATH(head.forward(testing::view(h.x, {h.n, h.c}), ops, targets),
               "lm_head: target 21 at row 5 is outside \\[0, 21\\)");
}

}  // namespace
}  // namespace sparq
