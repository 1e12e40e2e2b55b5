// GradientExchange on one rank (Self communicator): routing of dense buckets and the dense
// warm-up, error-feedback mass conservation on the store's gradient buffer, the powersgd
// layout taken from the bucket's tensors, and configuration errors
// (gradient_exchange_state_test.cpp: state round trips).
// Multi-rank averaging is covered by aggregation_mpi_test and the convergence test.
#include "compress/gradient_exchange.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/unexpected_communicator.h"
#include "compress/powersgd.h"
#include "exchange_fixture.h"

namespace sparq::compress {
namespace {

using Fixture = testing::ExchangeFixture;

using testing::lbs_exchange_config;

TEST(GradientExchange, NoneIsTheExactAverageAndCountsDenseBytes) {
  Fixture f;
  GradientExchangeConfig c;
  auto x = f.make(c);
  f.fill_grads(1);
  const std::vector<float> before = f.grads();
  f.exchange_all(*x, 0);
  EXPECT_EQ(f.grads(), before);
  EXPECT_EQ(x->last_payload_bytes(), x->last_dense_bytes());
  EXPECT_EQ(x->last_dense_bytes(), static_cast<std::size_t>(f.stack.store.flat_numel()) * 4);
  EXPECT_TRUE(x->residual().empty());
  EXPECT_EQ(x->compressor_name(0), "none");
}

TEST(GradientExchange, ErrorFeedbackConservesMassInTheStoreLayout) {
  Fixture f;
  auto x = f.make(lbs_exchange_config());
  EXPECT_EQ(x->compressor_name(0), "lbs/allgather+ef");
  ASSERT_EQ(x->residual().size(), static_cast<std::size_t>(f.stack.store.flat_numel()));
  std::vector<float> carried(x->residual().size(), 0.0f);  // the residual before the step
  for (int step = 0; step < 3; ++step) {
    f.fill_grads(100 + step);
    const std::vector<float> g = f.grads();
    f.exchange_all(*x, step);
    const std::vector<float> sent = f.grads();
    double max_err = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double conserved = double(sent[i]) + x->residual()[i] - (g[i] + carried[i]);
      max_err = std::max(max_err, std::fabs(conserved));
    }
    EXPECT_LT(max_err, 1e-5) << "step " << step;
    carried.assign(x->residual().begin(), x->residual().end());
    double sq = 0;  // the norm the exchange reports is measured per bucket on its thread
    for (float e : carried) sq += double(e) * e;
    EXPECT_GT(x->residual_norm(), 0.0);
    EXPECT_NEAR(x->residual_norm(), std::sqrt(sq), 1e-6 * std::sqrt(sq));
    EXPECT_LT(x->last_payload_bytes() * 5, x->last_dense_bytes()) << "lbs should compress";
  }
}

// Note [Padding stays zero] (core/param_store.h): the sign codecs decode +scale into a zero
// entry, and so into the alignment gaps between tensors; the exchange zeroes the gaps of
// their buckets again, so clipping's flat norm and the GPU optimizer's whole-span kernels see
// zeros there. The tensors' own entries are what the codec decoded. lbs needs nothing.
TEST(GradientExchange, SignCodecsLeaveThePaddingZero) {
  for (const char* name : {"signsgd", "onebit", "lbs"}) {
    Fixture f;
    const ParamStore& s = f.stack.store;
    const std::vector<ParamRange> gaps = s.padding_in({0, s.flat_numel()});
    ASSERT_FALSE(gaps.empty()) << "the fixture's biases leave gaps";
    GradientExchangeConfig c;
    c.compress = {name, {}, "compress"};
    auto x = f.make(c);
    std::vector<bool> in_gap(static_cast<std::size_t>(s.flat_numel()), false);
    for (const ParamRange& g : gaps) std::fill_n(in_gap.begin() + g.offset, g.count, true);
    for (int step = 0; step < 2; ++step) {
      f.fill_grads(40 + step);
      for (std::size_t i = 0; i < in_gap.size(); ++i) {
        if (in_gap[i]) s.grads()[i] = 0.0f;  // as backward leaves them
      }
      f.exchange_all(*x, step);
      std::size_t nonzero_in_gaps = 0, nonzero_in_tensors = 0;
      for (std::size_t i = 0; i < in_gap.size(); ++i) {
        (in_gap[i] ? nonzero_in_gaps : nonzero_in_tensors) += s.grads()[i] != 0.0f;
      }
      EXPECT_EQ(nonzero_in_gaps, 0u) << name << ", step " << step;
      EXPECT_GT(nonzero_in_tensors, 0u) << name;
    }
  }
}

TEST(ParamStore, PaddingInListsTheGapsOfARange) {
  ParamStore s;
  s.add({"a", {10}, Init::zeros(), false});
  s.add({"b", {64}, Init::zeros(), false});
  s.add({"c", {3}, Init::zeros(), false});
  s.allocate();
  // a at 0 (gap 10..64), b at 64 (no gap), c at 128 (gap 131..192, the end of the layout).
  ASSERT_EQ(s.flat_numel(), 192);
  EXPECT_EQ(s.padding_in({0, 192}), (std::vector<ParamRange>{{10, 54}, {131, 61}}));
  EXPECT_EQ(s.padding_in({5, 60}), (std::vector<ParamRange>{{10, 54}}));
  EXPECT_EQ(s.padding_in({64, 64}), std::vector<ParamRange>{});
  EXPECT_EQ(s.padding_in({20, 10}), (std::vector<ParamRange>{{20, 10}}));
}

TEST(GradientExchange, DenseBucketsAndWarmupStepsAreSentExactly) {
  Fixture f({"*.bias", "*ln_*"});
  GradientExchangeConfig c = lbs_exchange_config();
  c.dense_warmup_steps = 2;
  auto x = f.make(c);
  ASSERT_TRUE(f.plan.buckets().back().dense);
  EXPECT_FALSE(x->compressing_at(1));
  EXPECT_TRUE(x->compressing_at(2));

  f.fill_grads(3);
  const std::vector<float> before = f.grads();
  f.exchange_all(*x, 1);  // warm-up: everything dense, residual untouched
  EXPECT_EQ(f.grads(), before);
  EXPECT_EQ(x->residual_norm(), 0.0);

  f.exchange_all(*x, 2);  // compressing: dense buckets still exact, their residual stays 0
  for (const comm::Bucket& b : f.plan.buckets()) {
    const ParamRange r = b.range;
    for (std::int64_t i = r.offset; i < r.end(); ++i) {
      if (b.dense) {
        ASSERT_EQ(f.grads()[i], before[i]) << "dense bucket " << b.index;
        ASSERT_EQ(x->residual()[i], 0.0f);
      }
    }
    EXPECT_EQ(x->last_stats()[b.index].compressed, !b.dense);
  }
}

// A world of two that records where allreduce reads and writes, and leaves the data as it is
// (the average of two equal contributions). Nothing else may be called.
class AllreduceSpy final : public ::sparq::testing::UnexpectedCommunicator {
 public:
  struct Call {
    const void* in;
    void* out;
    std::size_t count;
    DType dtype;
    comm::ReduceOp op;
  };
  std::vector<Call> calls;
  void allreduce(const void* in, void* out, std::size_t count, DType dtype,
                 comm::ReduceOp op) override {
    calls.push_back({in, out, count, dtype, op});
  }
};

TEST(GradientExchange, DensePathAveragesTheGradientViewItselfWithNoStagingCopy) {
  Fixture f({"*.bias"});
  GradientExchangeConfig c = lbs_exchange_config();
  c.dense_warmup_steps = 1;
  for (const bool none : {true, false}) {
    if (none) c.compress = {"none", {}, "compress"};
    auto x = f.make(c);
    AllreduceSpy spy;
    for (std::int64_t step : {0, 1}) {
      std::size_t exchanged = 0;
      for (const comm::Bucket& b : f.plan.buckets()) {
        if (!none && step == 1 && !b.dense) continue;  // step 1 compresses it
        ++exchanged;  // the exchange counts the buckets it ran this step
        spy.calls.clear();
        ASSERT_TRUE(x->average_bucket(spy, b, step).is_ok());
        // The step's last bucket also agrees on the non-finite count (Note [Non-finite local
        // gradients], gradient_exchange.h): one i32 sum after its own average.
        const bool last = exchanged == f.plan.size();
        ASSERT_EQ(spy.calls.size(), last ? 2u : 1u) << "bucket " << b.index;
        if (last) {
          EXPECT_EQ(spy.calls[1].count, 1u);
          EXPECT_EQ(spy.calls[1].dtype, DType::kI32);
          EXPECT_EQ(spy.calls[1].op, comm::ReduceOp::kSum);
        }
        const AllreduceSpy::Call& call = spy.calls[0];
        float* view = f.stack.store.grads() + b.range.offset;
        EXPECT_EQ(call.in, view);
        EXPECT_EQ(call.out, view) << "the average must be formed in the gradient view";
        EXPECT_EQ(call.count, static_cast<std::size_t>(b.range.count));
        EXPECT_EQ(call.dtype, DType::kF32);
        EXPECT_EQ(call.op, comm::ReduceOp::kAvg);
      }
    }
  }
}

TEST(GradientExchange, PowerSgdSeesTheBucketsWeightMatrices) {
  Fixture f({"*.bias", "*ln_*"});
  GradientExchangeConfig c;
  c.compress = {"powersgd", {{"rank", "2"}, {"min_compress_numel", "64"}}, "compress"};
  auto x = f.make(c);
  f.fill_grads(5);
  f.exchange_all(*x, 0);
  EXPECT_GT(x->residual_norm(), 0.0);  // rank 2 of random matrices loses something
  EXPECT_EQ(x->compressor_name(0), "powersgd/low_rank+ef");
}

// A matrix larger than bucket_mb is split over several buckets; powersgd compresses the whole
// rows each piece holds instead of sending the pieces dense.
TEST(GradientExchange, PowerSgdCompressesThePiecesOfASplitMatrix) {
  Fixture f({"*.bias", "*ln_*"});
  comm::BucketPlanConfig small = f.plan_config;
  small.first_bucket_mb = 0.005;  // 1310 floats: the stack's 4096-element matrices split
  small.bucket_mb = 0.005;
  f.plan = comm::BucketPlan::build(f.stack.store, f.stack.layers, small).value();
  GradientExchangeConfig c;
  c.compress = {"powersgd", {{"rank", "2"}, {"min_compress_numel", "64"}}, "compress"};
  auto x = f.make(c);
  f.fill_grads(6);
  f.exchange_all(*x, 0);
  std::map<std::string, int> pieces;
  for (const comm::Bucket& b : f.plan.buckets()) {
    for (const std::string& t : b.tensors) ++pieces[t];
  }
  int split_buckets = 0;
  for (const comm::Bucket& b : f.plan.buckets()) {
    if (b.dense || b.tensors.size() != 1 || pieces[b.tensors[0]] < 2) continue;
    const ParamEntry& e = f.stack.store.entry(b.tensors[0]);
    const std::int64_t cols = e.numel / e.spec.shape[0];
    if (b.range.count < 4 * cols) continue;  // mostly the partial-row fringe: dense
    ++split_buckets;
    // Rank 2 of [rows, cols] sends (rows + cols) * 2 floats: at most 60% of 4+ rows of 128.
    const BucketExchangeStats& st = x->last_stats()[b.index];
    EXPECT_LT(10 * st.payload_bytes, 6 * st.dense_bytes)
        << "bucket " << b.index << " (a piece of " << b.tensors[0] << ") went dense";
  }
  EXPECT_GE(split_buckets, 4);
}

TEST(GradientExchange, RejectsAnAggregationTheCompressorCannotUse) {
  Fixture f;
  GradientExchangeConfig c;
  c.compress = {"powersgd", {}, "compress"};
  c.aggregation = "allgather";
  auto x = GradientExchange::create(f.stack.store, f.plan, c);
  ASSERT_FALSE(x.is_ok());
  EXPECT_NE(x.status().message().find("compress.aggregation"), std::string::npos)
      << x.status().message();
  // powersgd's factors only sum inside its own strategy, low_rank.
  c.aggregation = "allreduce";
  x = GradientExchange::create(f.stack.store, f.plan, c);
  ASSERT_FALSE(x.is_ok());
  EXPECT_NE(x.status().message().find("compress.aggregation: powersgd cannot aggregate by "
                                      "allreduce (its messages do not sum; its own strategy is "
                                      "low_rank)"),
            std::string::npos)
      << x.status().message();

  c.compress = {"lbs", {{"densty", "0.1"}}, "compress"};
  c.aggregation = "auto";
  x = GradientExchange::create(f.stack.store, f.plan, c);
  ASSERT_FALSE(x.is_ok());
  EXPECT_NE(x.status().message().find("compress.densty"), std::string::npos)
      << x.status().message();
}

// comm.plan: auto's per-bucket choices: "dense" sends a compressed-region bucket exactly, a
// strategy name replaces `aggregation` for that bucket alone, "" keeps the defaults.
TEST(GradientExchange, PerBucketChoicesOverrideKindAndStrategy) {
  Fixture f;
  ASSERT_GE(f.plan.size(), 3u);
  GradientExchangeConfig c = lbs_exchange_config();
  c.bucket_choice.assign(f.plan.size(), "");
  c.bucket_choice[0] = "dense";
  c.bucket_choice[1] = "two_phase";
  auto x = f.make(c);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->compressor_name(0), "none");
  EXPECT_EQ(x->compressor_name(1), "lbs/two_phase+ef");
  EXPECT_EQ(x->compressor_name(2), "lbs/allgather+ef");
  f.fill_grads(3);
  const std::vector<float> before = f.grads();
  f.exchange_all(*x, 0);
  const comm::Bucket& b0 = f.plan.buckets()[0];
  for (std::int64_t i = b0.range.offset; i < b0.range.end(); ++i) {
    ASSERT_EQ(f.grads()[i], before[i]) << "the dense choice changed element " << i;
  }
  EXPECT_FALSE(x->last_stats()[0].compressed);
  EXPECT_TRUE(x->last_stats()[1].compressed);

  c.bucket_choice.pop_back();
  auto wrong = GradientExchange::create(f.stack.store, f.plan, c);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("bucket choices"), std::string::npos);
  c.bucket_choice.assign(f.plan.size(), "tre");
  wrong = GradientExchange::create(f.stack.store, f.plan, c);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("unknown aggregation 'tre'"), std::string::npos)
      << wrong.status().message();
}

}  // namespace
}  // namespace sparq::compress
