// The dense path of GradientExchange under mpirun (docs/comm.md, "Dense means in place"):
// `compress.name: none`, dense-routed buckets and dense warm-up steps average the gradient view
// in place, exactly: each rank holds (rank + 1) * (i % 7), whose average over P ranks,
// (P + 1) / 2 * (i % 7), is a float the sum and the division reach without rounding.
#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"
#include "core/ops.h"
#include "exchange_fixture.h"

namespace sparq::compress {
namespace {

using Fixture = testing::ExchangeFixture;

class DenseExchangeMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = comm::make_mpi_communicator();
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    comm_ = std::move(c).value();
  }
  void fill_exact(Fixture& f) const {
    float* g = f.stack.store.grads();
    for (std::int64_t i = 0; i < f.stack.store.flat_numel(); ++i) {
      g[i] = static_cast<float>((comm_->rank() + 1) * (i % 7));
    }
  }
  void expect_exact_average(const Fixture& f, const comm::Bucket& b) const {
    const float* g = f.stack.store.grads();
    const float half = static_cast<float>(comm_->size() + 1) / 2.0f;
    for (std::int64_t i = b.range.offset; i < b.range.end(); ++i) {
      ASSERT_EQ(g[i], half * static_cast<float>(i % 7)) << "bucket " << b.index << " at " << i;
    }
  }
  std::unique_ptr<comm::Communicator> comm_;
};

TEST_F(DenseExchangeMpi, NoneAveragesEveryBucketExactlyInPlace) {
  Fixture f;
  auto x = f.make(GradientExchangeConfig{});
  fill_exact(f);
  for (const comm::Bucket& b : f.plan.buckets()) {
    ASSERT_TRUE(x->average_bucket(*comm_, b, 0).is_ok());
    expect_exact_average(f, b);
    EXPECT_EQ(x->last_stats()[b.index].payload_bytes, b.range.count * sizeof(float));
  }
}

TEST_F(DenseExchangeMpi, DenseBucketsAndWarmupStepsOfACompressorAreExactToo) {
  Fixture f({"*.bias"});
  GradientExchangeConfig c;
  c.compress = {"lbs", {{"density", "0.05"}, {"bits", "4"}}, "compress"};
  c.dense_warmup_steps = 1;
  auto x = f.make(c);
  bool saw_dense_bucket = false;
  for (std::int64_t step : {0, 1}) {
    fill_exact(f);
    for (const comm::Bucket& b : f.plan.buckets()) {
      ASSERT_TRUE(x->average_bucket(*comm_, b, step).is_ok());
      if (step == 0 || b.dense) expect_exact_average(f, b);
      saw_dense_bucket |= b.dense;
      EXPECT_EQ(x->last_stats()[b.index].compressed, step == 1 && !b.dense);
    }
    const auto residual = x->residual();
    ASSERT_FALSE(residual.empty());
    const double norm = ops::sum_squares(residual.data(), residual.size());
    if (step == 0) {
      // The warm-up left the residual untouched (zero), on every rank.
      EXPECT_EQ(norm, 0.0) << "rank " << comm_->rank() << ": the dense warm-up wrote the residual";
    } else {
      EXPECT_GT(norm, 0.0) << "rank " << comm_->rank() << ": step 1's compression kept nothing";
    }
  }
  EXPECT_TRUE(saw_dense_bucket);
}

}  // namespace
}  // namespace sparq::compress
