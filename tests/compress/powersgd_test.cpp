#include "compress/powersgd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "comm/communicator.h"
#include "compress/aggregation.h"
#include "compress/powersgd_math.h"
#include "core/ops.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

std::unique_ptr<PowerSgdCompressor> make_psgd(std::map<std::string, std::string> params) {
  auto c = testing::make("powersgd", std::move(params));
  return std::unique_ptr<PowerSgdCompressor>(dynamic_cast<PowerSgdCompressor*>(c.release()));
}

// A row-major [rows, cols] matrix a b^T of rank one, a and b normal with these seeds.
std::vector<float> rank_one(std::size_t rows, std::size_t cols, int seed_a, int seed_b) {
  const auto a = testing::normal_vector(rows, seed_a), b = testing::normal_vector(cols, seed_b);
  std::vector<float> g(rows * cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) g[i * cols + j] = a[i] * b[j];
  }
  return g;
}

TEST(PowerSgd, RecoversALowRankMatrixAndSendsTheRestDense) {
  const std::size_t rows = 64, cols = 48, tail = 10, n = rows * cols + tail;
  const auto a = testing::normal_vector(rows * 2, 1), b = testing::normal_vector(cols * 2, 2);
  std::vector<float> g(n);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      g[i * cols + j] = a[2 * i] * b[2 * j] + a[2 * i + 1] * b[2 * j + 1];
    }
  }
  for (std::size_t i = 0; i < tail; ++i) g[rows * cols + i] = 0.5f * i;
  for (const char* alternate : {"false", "true"}) {
    auto c = make_psgd({{"rank", "2"}, {"min_compress_numel", "16"}, {"alternate", alternate}});
    ASSERT_TRUE(c->set_layout(n, {{"w", 0, rows, cols}}).is_ok());
    auto comm = comm::make_self_communicator();
    auto strategy = make_aggregator(Aggregation::kLowRank);
    std::vector<float> bucket = g;
    EXPECT_TRUE(strategy->run(bucket, *c, nullptr, *comm, {}).is_ok());
    // The alternate variant's first exchange projects onto a random orthonormal Q, which
    // recovers a rank-2 matrix only after its P step: run one more exchange.
    if (std::string(alternate) == "true") {
      bucket = g;
      EXPECT_TRUE(strategy->run(bucket, *c, nullptr, *comm, {}).is_ok());
    }
    const double err = testing::squared_distance(bucket, g), norm = testing::squared_norm(g);
    EXPECT_LT(err, 1e-9 * norm) << alternate;
    for (std::size_t i = 0; i < tail; ++i) EXPECT_EQ(bucket[rows * cols + i], g[rows * cols + i]);
    EXPECT_EQ(strategy->last_payload_bytes(),
              std::string(alternate) == "true" ? 4 * (cols * 2 + tail) : 4 * ((rows + cols) * 2 + tail));
  }
}

// A step whose matrix is zero everywhere (a frozen layer, or a step whose non-finite
// gradients were sent as zeros) must not zero the warm start for good: afterwards the low-rank
// matrix is recovered exactly as without that step.
TEST(PowerSgd, AZeroStepKeepsTheWarmStart) {
  const std::size_t rows = 32, cols = 24, n = rows * cols;
  const std::vector<float> g = rank_one(rows, cols, 5, 6);
  for (const char* alternate : {"false", "true"}) {
    auto c = make_psgd({{"rank", "1"}, {"min_compress_numel", "16"}, {"alternate", alternate}});
    ASSERT_TRUE(c->set_layout(n, {{"w", 0, rows, cols}}).is_ok());
    auto comm = comm::make_self_communicator();
    auto strategy = make_aggregator(Aggregation::kLowRank);
    std::vector<float> bucket(n, 0.0f);
    for (int zero_steps = 0; zero_steps < 2; ++zero_steps) {
      bucket.assign(n, 0.0f);
      ASSERT_TRUE(strategy->run(bucket, *c, nullptr, *comm, {}).is_ok());
      EXPECT_EQ(testing::squared_norm(bucket), 0.0) << alternate;
    }
    for (int step = 0; step < 2; ++step) {
      bucket = g;
      ASSERT_TRUE(strategy->run(bucket, *c, nullptr, *comm, {}).is_ok());
    }
    EXPECT_LT(testing::squared_distance(bucket, g), 1e-9 * testing::squared_norm(g)) << alternate;
  }
}

TEST(PowerSgd, ErrorFeedbackConservesMassThroughTheExchange) {
  const std::size_t n = 3000;
  for (const char* alternate : {"false", "true"}) {
    auto c = make_psgd({{"rank", "3"}, {"min_compress_numel", "64"}, {"alternate", alternate}});
    ASSERT_TRUE(c->set_layout(n, {{"a", 0, 40, 50}, {"bias", 2000, 1, 50}, {"b", 2100, 30, 30}})
                    .is_ok());
    EXPECT_EQ(c->matrices().size(), 2u);
    auto comm = comm::make_self_communicator();
    auto strategy = make_aggregator(Aggregation::kLowRank);
    std::vector<float> residual(n, 0.0f);
    ErrorFeedback ef(residual);
    for (int step = 0; step < 4; ++step) {
      const auto g = testing::normal_vector(n, 10 + step);
      const std::vector<float> before = residual;
      std::vector<float> bucket = g;
      EncodeContext ctx;
      ctx.step = step;
      EXPECT_TRUE(strategy->run(bucket, *c, &ef, *comm, ctx).is_ok());
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(bucket[i] + residual[i], g[i] + before[i], 1e-4f) << alternate << " " << i;
      }
      EXPECT_GT(ops::sum_squares(residual.data(), n), 0.0);
    }
  }
}

TEST(PowerSgd, StateRoundTripsAndContinuesIdentically) {
  const std::size_t n = 4096;
  auto comm = comm::make_self_communicator();
  auto strategy = make_aggregator(Aggregation::kLowRank);
  auto first = make_psgd({{"rank", "2"}, {"alternate", "true"}});
  std::vector<float> bucket = testing::normal_vector(n, 3);
  EXPECT_TRUE(strategy->run(bucket, *first, nullptr, *comm, {}).is_ok());
  std::vector<std::uint8_t> state;
  first->save_state(state);
  auto second = make_psgd({{"rank", "2"}, {"alternate", "true"}});
  second->prepare(n, {});
  ASSERT_TRUE(second->load_state(state).is_ok());
  std::vector<float> x = testing::normal_vector(n, 4), y = x;
  EXPECT_TRUE(strategy->run(x, *first, nullptr, *comm, {}).is_ok());
  EXPECT_TRUE(strategy->run(y, *second, nullptr, *comm, {}).is_ok());
  EXPECT_EQ(x, y);
  EXPECT_FALSE(second->load_state(std::span<const std::uint8_t>(state.data(), 5)).is_ok());
}

TEST(PowerSgd, StateOfAnotherRankIsRefusedNotReadPastItsEnd) {
  const std::size_t n = 4096;
  auto comm = comm::make_self_communicator();
  auto strategy = make_aggregator(Aggregation::kLowRank);
  auto saved_at_rank_4 = make_psgd({{"rank", "4"}});
  std::vector<float> bucket = testing::normal_vector(n, 3);
  ASSERT_TRUE(strategy->run(bucket, *saved_at_rank_4, nullptr, *comm, {}).is_ok());
  std::vector<std::uint8_t> state;
  saved_at_rank_4->save_state(state);
  auto rank_2 = make_psgd({{"rank", "2"}});
  rank_2->prepare(n, {});
  const Status loaded = rank_2->load_state(state);
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.message().find("compress.rank"), std::string::npos) << loaded.message();
  // A state saved before the first exchange (no factors yet) still loads.
  auto fresh = make_psgd({{"rank", "2"}});
  fresh->prepare(n, {});
  std::vector<std::uint8_t> empty_state;
  fresh->save_state(empty_state);
  EXPECT_TRUE(rank_2->load_state(empty_state).is_ok());
  // At an odd exchange of the alternating scheme the next one starts from P: a state without
  // it was accepted and then read an empty factor (review, 2026-12-06).
  auto alternating = make_psgd({{"rank", "2"}, {"alternate", "true"}});
  alternating->prepare(n, {});
  std::vector<std::uint8_t> odd_without_p = empty_state;
  odd_without_p[0] = 1;  // the parity, a little-endian u64 first
  const Status odd = alternating->load_state(odd_without_p);
  ASSERT_FALSE(odd.is_ok());
  EXPECT_NE(odd.message().find("holds no P factor"), std::string::npos) << odd.message();
  EXPECT_TRUE(alternating->load_state(empty_state).is_ok());
}

// A piece of a tensor the bucket plan split can hold fewer rows than the rank: it goes dense,
// where the whole run was refused naming the piece ('rank: 40 exceeds min(rows, cols) = 17 of
// tensor h.2.mlp.proj.weight rows 0..17', review). A whole tensor is still refused.
TEST(PowerSgd, APieceWithFewerRowsThanTheRankGoesDense) {
  auto c = make_psgd({{"rank", "4"}});
  // Both above min_compress_numel (4096), so only the rank decides.
  const Status pieces =
      c->set_layout(10000, {{"w rows 0..2", 0, 2, 2500, true}, {"v", 5000, 64, 64, false}});
  ASSERT_TRUE(pieces.is_ok()) << pieces.message();
  ASSERT_EQ(c->matrices().size(), 1u);
  EXPECT_EQ(c->matrices()[0].name, "v");
  auto whole = make_psgd({{"rank", "4"}});
  EXPECT_FALSE(whole->set_layout(10000, {{"w", 0, 2, 2500, false}}).is_ok());
}

// No bytes at all is StateMerge's "reset to its initial value" (an elastic resume whose plan
// moved the bucket): the compressor continues as a fresh one. It failed with "saved state
// truncated", which ended the resume.
TEST(PowerSgd, NoStateLoadsAsAFreshCompressor) {
  const std::size_t n = 4096;
  auto comm = comm::make_self_communicator();
  auto strategy = make_aggregator(Aggregation::kLowRank);
  auto used = make_psgd({{"rank", "2"}});
  std::vector<float> bucket = testing::normal_vector(n, 3);
  ASSERT_TRUE(strategy->run(bucket, *used, nullptr, *comm, {}).is_ok());
  const Status loaded = used->load_state({});
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  EXPECT_EQ(used->exchanges(), 0u);
  auto fresh = make_psgd({{"rank", "2"}});
  fresh->prepare(n, {});
  std::vector<float> x = testing::normal_vector(n, 4), y = x;
  ASSERT_TRUE(strategy->run(x, *used, nullptr, *comm, {}).is_ok());
  ASSERT_TRUE(strategy->run(y, *fresh, nullptr, *comm, {}).is_ok());
  EXPECT_EQ(x, y);
}

// The exchange the low_rank strategy must reproduce exactly (it was Compressor::self_aggregate
// before the strategy existed), written out for one rank: the sum over ranks of a message is
// the message, so each allreduce is the identity and the average is scaled by 1. The products
// are powersgd's own (powersgd.h), so that the floats can be compared exactly: what is checked
// is the order of the steps, what is kept, backed up, sent and left in the residual.
struct ReferenceExchange {
  std::size_t r;
  bool alternate;
  std::vector<MatrixSegment> matrices;
  std::vector<std::vector<float>> p, q;
  std::uint64_t exchanges = 0;

  // bucket <- M_hat (dense floats unchanged), a <- a - M_hat on matrices and 0 elsewhere.
  std::size_t run(std::vector<float>& bucket, std::vector<float>* residual) {
    std::vector<float> a = bucket;
    if (residual) {
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = (*residual)[i] + bucket[i];
    }
    const bool first_is_p = !alternate || exchanges % 2 == 0;
    std::vector<std::vector<float>> first(matrices.size());
    std::size_t floats = 0;
    for (std::size_t m = 0; m < matrices.size(); ++m) {
      const MatrixSegment& s = matrices[m];
      first[m].resize((first_is_p ? s.rows : s.cols) * r);
      if (first_is_p) {
        if (alternate) orthonormalize_columns(q[m].data(), s.cols, r);
        times_factor(a.data() + s.offset, s, q[m].data(), r, first[m].data());
      } else {
        orthonormalize_columns(p[m].data(), s.rows, r);
        times_t_factor(a.data() + s.offset, s, p[m].data(), r, first[m].data());
      }
      floats += first[m].size();
    }
    // The warm start an all-zero exchange falls back to: the factors as this exchange used
    // them (orthonormalised above in the alternate variant).
    const auto backup_q = q, backup_p = p;
    for (std::size_t m = 0; m < matrices.size(); ++m) {
      const MatrixSegment& s = matrices[m];
      (first_is_p ? p[m] : q[m]) = first[m];
      if (!alternate) {
        orthonormalize_columns(p[m].data(), s.rows, r);
        q[m].resize(s.cols * r);
        times_t_factor(a.data() + s.offset, s, p[m].data(), r, q[m].data());
        floats += q[m].size();
      }
    }
    std::vector<bool> in_matrix(bucket.size(), false);
    for (std::size_t m = 0; m < matrices.size(); ++m) {
      const MatrixSegment& s = matrices[m];
      outer_factors(p[m].data(), q[m].data(), s, r, bucket.data() + s.offset);
      std::fill_n(in_matrix.begin() + s.offset, s.rows * s.cols, true);
    }
    const auto zero = [](const std::vector<float>& v) {
      return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
    };
    for (std::size_t m = 0; m < matrices.size(); ++m) {
      if (zero(q[m])) q[m] = backup_q[m];
      if (alternate && zero(p[m])) p[m] = backup_p[m];
    }
    std::size_t dense = 0;
    for (std::size_t i = 0; i < bucket.size(); ++i) {
      if (residual) (*residual)[i] = in_matrix[i] ? a[i] - bucket[i] : 0.0f;
      dense += in_matrix[i] ? 0 : 1;
    }
    ++exchanges;
    return 4 * (floats + dense);
  }

  // PowerSgdCompressor::save_state's layout: u64 parity, then per matrix |P|, P, |Q|, Q.
  std::vector<std::uint8_t> state() const {
    std::vector<std::uint8_t> out;
    const auto put = [&](const void* data, std::size_t bytes) {
      const auto* b = static_cast<const std::uint8_t*>(data);
      out.insert(out.end(), b, b + bytes);
    };
    const std::uint64_t parity = exchanges % 2;
    put(&parity, 8);
    for (std::size_t m = 0; m < matrices.size(); ++m) {
      for (const auto* v : {&p[m], &q[m]}) {
        const std::uint64_t len = v->size();
        put(&len, 8);
        put(v->data(), 4 * len);
      }
    }
    return out;
  }
};

TEST(PowerSgd, LowRankStrategyIsTheExchangeFloatForFloat) {
  const std::size_t n = 3000, r = 3;
  const std::vector<MatrixSegment> layout = {{"a", 0, 40, 50}, {"bias", 2000, 1, 50},
                                             {"b", 2100, 30, 30}};
  auto comm = comm::make_self_communicator();
  for (const char* alternate : {"false", "true"}) {
    for (bool with_ef : {false, true}) {
      auto c = make_psgd({{"rank", "3"}, {"min_compress_numel", "64"}, {"alternate", alternate}});
      ASSERT_TRUE(c->set_layout(n, layout).is_ok());
      c->prepare(n, {});
      ReferenceExchange ref{r, std::string(alternate) == "true", c->matrices(), {}, {}};
      ref.p.resize(ref.matrices.size());
      for (std::size_t m = 0; m < ref.matrices.size(); ++m) ref.q.push_back(c->q_factor(m));
      auto strategy = make_aggregator(Aggregation::kLowRank);
      EXPECT_EQ(strategy->name(), "low_rank");
      std::vector<float> residual(n, 0.0f), ref_residual(n, 0.0f);
      ErrorFeedback ef(residual);
      for (int step = 0; step < 5; ++step) {
        // Step 2 is all zeros: the warm start must survive it.
        std::vector<float> bucket =
            step == 2 ? std::vector<float>(n, 0.0f) : testing::normal_vector(n, 40 + step);
        std::vector<float> want = bucket;
        EncodeContext ctx;
        ctx.step = step;
        ASSERT_TRUE(strategy->run(bucket, *c, with_ef ? &ef : nullptr, *comm, ctx).is_ok());
        const std::size_t bytes = ref.run(want, with_ef ? &ref_residual : nullptr);
        const std::string what = std::string("alternate ") + alternate + " ef " +
                                 (with_ef ? "on" : "off") + " step " + std::to_string(step);
        EXPECT_EQ(bucket, want) << what;
        EXPECT_EQ(residual, ref_residual) << what;
        EXPECT_EQ(strategy->last_payload_bytes(), bytes) << what;
        std::vector<std::uint8_t> state;
        c->save_state(state);
        EXPECT_EQ(state, ref.state()) << what;
        strategy->save_state(state);
        EXPECT_TRUE(state.empty()) << "low_rank keeps no state of its own";
      }
    }
  }
}

// Note [PowerSGD's fixed summation order]: the CPU's cache-friendly loops give, bit for bit,
// the one-output element functions the GPU's threads run (odd shapes, several OpenMP-sized
// products), and they are the products they claim to be.
TEST(PowerSgd, ProductsAreTheSharedElementFunctionsBitForBit) {
  for (auto [rows, cols, r] :
       {std::tuple<std::size_t, std::size_t, std::size_t>{37, 53, 3}, {301, 257, 4}, {5, 700, 1}}) {
    const MatrixSegment s{"m", 0, rows, cols};
    const auto m = testing::normal_vector(rows * cols, 1);
    const auto fq = testing::normal_vector(cols * r, 2), fp = testing::normal_vector(rows * r, 3);
    std::vector<float> mq(rows * r), mtp(cols * r), outer(rows * cols);
    times_factor(m.data(), s, fq.data(), r, mq.data());
    times_t_factor(m.data(), s, fp.data(), r, mtp.data());
    outer_factors(fp.data(), fq.data(), s, r, outer.data());
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < r; ++j) {
        ASSERT_EQ(mq[i * r + j], psgd_times_factor(m.data() + i * cols, fq.data(), cols, r, j));
        double want = 0;
        for (std::size_t k = 0; k < cols; ++k) want += double(m[i * cols + k]) * fq[k * r + j];
        ASSERT_NEAR(mq[i * r + j], want, 1e-4 * std::sqrt(double(cols)));
      }
    }
    for (std::size_t k = 0; k < cols; ++k) {
      for (std::size_t j = 0; j < r; ++j) {
        ASSERT_EQ(mtp[k * r + j], psgd_times_t_factor(m.data(), fp.data(), rows, cols, r, k, j));
      }
    }
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t k = 0; k < cols; ++k) {
        ASSERT_EQ(outer[i * cols + k], psgd_outer(fp.data() + i * r, fq.data() + k * r, r));
      }
    }
  }
}

// Orthonormalisation with chunked dot products: orthonormal columns over several chunks and
// a ragged last one, a column that vanishes left as zeros.
TEST(PowerSgd, OrthonormalizeGivesOrthonormalColumns) {
  const std::size_t rows = 3 * kOrthChunkRows + 17, r = 4;
  auto m = testing::normal_vector(rows * r, 9);
  for (std::size_t i = 0; i < rows; ++i) m[i * r + 2] = 0.0f;  // a zero column stays zeros
  orthonormalize_columns(m.data(), rows, r);
  for (std::size_t a = 0; a < r; ++a) {
    for (std::size_t b = 0; b <= a; ++b) {
      double dot = 0;
      for (std::size_t i = 0; i < rows; ++i) dot += double(m[i * r + a]) * m[i * r + b];
      const double want = a == b && a != 2 ? 1.0 : 0.0;
      EXPECT_NEAR(dot, want, 1e-5) << a << " " << b;
    }
  }
}

// Columns that depend on earlier ones (a gradient whose rank is below powersgd.rank) leave
// only rounding noise after one projection pass; the second pass (Note [Gram-Schmidt twice])
// makes them unit directions orthogonal to the rest, not noise overlapping them.
TEST(PowerSgd, OrthonormalizeKeepsDependentColumnsOrthogonal) {
  const std::size_t rows = 3 * kOrthChunkRows + 17, r = 4;
  auto m = testing::normal_vector(rows * r, 11);
  for (std::size_t i = 0; i < rows; ++i) {
    m[i * r + 1] = 2.0f * m[i * r + 0];
    m[i * r + 3] = m[i * r + 0] - 0.5f * m[i * r + 2];
  }
  orthonormalize_columns(m.data(), rows, r);
  for (std::size_t a = 0; a < r; ++a) {
    for (std::size_t b = 0; b <= a; ++b) {
      double dot = 0;
      for (std::size_t i = 0; i < rows; ++i) dot += double(m[i * r + a]) * m[i * r + b];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-5) << a << " " << b;
    }
  }
}

// A rank-1 matrix under rank 4: P P^T M is a projection, so the exchange recovers M (before
// the second Gram-Schmidt pass the reconstruction overshot, relative error 0.4 and rising).
TEST(PowerSgd, AMatrixOfLowerRankThanTheRankIsRecovered) {
  const std::size_t rows = 64, cols = 48, n = rows * cols;
  const std::vector<float> g = rank_one(rows, cols, 12, 13);
  auto c = make_psgd({{"rank", "4"}, {"min_compress_numel", "16"}});
  ASSERT_TRUE(c->set_layout(n, {{"w", 0, rows, cols}}).is_ok());
  auto comm = comm::make_self_communicator();
  auto strategy = make_aggregator(Aggregation::kLowRank);
  for (int step = 0; step < 3; ++step) {  // warm-started steps: the error must not grow
    std::vector<float> bucket = g;
    ASSERT_TRUE(strategy->run(bucket, *c, nullptr, *comm, {}).is_ok());
    EXPECT_LT(testing::squared_distance(bucket, g), 1e-9 * testing::squared_norm(g)) << step;
  }
}

TEST(PowerSgd, LayoutErrorsNameTheKeyAndTensor) {
  auto c = make_psgd({{"rank", "8"}, {"min_compress_numel", "16"}});
  const Status too_big = c->set_layout(1000, {{"h.0.attn.proj.weight", 0, 4, 200}});
  ASSERT_FALSE(too_big.is_ok());
  EXPECT_NE(too_big.message().find("compress.rank"), std::string::npos) << too_big.message();
  EXPECT_NE(too_big.message().find("h.0.attn.proj.weight"), std::string::npos);
  EXPECT_FALSE(c->set_layout(1000, {{"a", 0, 20, 20}, {"b", 300, 20, 20}}).is_ok());
  EXPECT_FALSE(c->set_layout(100, {{"a", 0, 20, 20}}).is_ok());
  // Small tensors go dense instead of failing.
  EXPECT_TRUE(c->set_layout(1000, {{"tiny", 0, 2, 4}}).is_ok());
  EXPECT_TRUE(c->matrices().empty());
}

}  // namespace
}  // namespace sparq::compress
