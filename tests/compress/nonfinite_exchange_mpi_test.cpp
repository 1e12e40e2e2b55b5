// Note [Non-finite local gradients] (gradient_exchange.h) under mpirun: a NaN or Inf in one
// rank's gradient never reaches its residual or any message, every rank still takes part in
// every collective, and every rank sees the same skip signal (a NaN aggregate in the step's last
// bucket: here the plan's last, as the test runs them in plan order) and the same count of bad
// buckets.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "comm/mpi_communicator.h"
#include "core/ops.h"
#include "exchange_fixture.h"

namespace sparq::compress {
namespace {

using Fixture = testing::ExchangeFixture;

class NonfiniteExchangeMpi : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto c = comm::make_mpi_communicator();
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    comm_ = std::move(c).value();
  }
  GradientExchangeConfig config() const {
    GradientExchangeConfig c;
    const std::string name = GetParam();
    if (name == "two_phase") {
      c.compress = {"lbs", {{"density", "0.1"}, {"bits", "4"}}, "compress"};
      c.aggregation = "two_phase";
    } else if (name == "lbs") {
      c.compress = {"lbs", {{"density", "0.1"}, {"bits", "4"}}, "compress"};
    } else if (name == "qsgd" || name == "powersgd") {
      c.compress = {name, {}, "compress"};
    } else {
      c.compress = {name, {{"density", "0.1"}}, "compress"};
    }
    return c;
  }
  std::unique_ptr<comm::Communicator> comm_;
};

TEST_P(NonfiniteExchangeMpi, ABadRankKeepsItsResidualAndEveryRankSkips) {
  Fixture f({"*.bias"});
  auto x = f.make(config());
  ASSERT_NE(x, nullptr);
  const std::span<float> e = x->residual();
  const auto& buckets = f.plan.buckets();
  const comm::Bucket* poisoned = nullptr;  // the first compressed bucket
  for (const comm::Bucket& b : buckets) {
    if (!b.dense) {
      poisoned = &b;
      break;
    }
  }
  ASSERT_NE(poisoned, nullptr);
  const int bad_rank = comm_->size() - 1;

  // Step 0 is clean and fills the residuals.
  f.fill_grads(11 + static_cast<std::uint32_t>(comm_->rank()));
  for (const comm::Bucket& b : buckets) ASSERT_TRUE(x->average_bucket(*comm_, b, 0).is_ok());
  EXPECT_EQ(x->last_nonfinite_buckets_all_ranks(), 0);
  EXPECT_TRUE(ops::all_finite(f.stack.store.grads(),
                              static_cast<std::size_t>(f.stack.store.flat_numel())));
  const std::vector<float> before(e.begin(), e.end());

  // Step 1: one rank has a NaN and an Inf in the first compressed bucket, and an Inf in a
  // dense bucket.
  f.fill_grads(23 + static_cast<std::uint32_t>(comm_->rank()));
  float* g = f.stack.store.grads();
  if (comm_->rank() == bad_rank) {
    g[poisoned->range.offset + 3] = std::numeric_limits<float>::quiet_NaN();
    g[poisoned->range.end() - 1] = std::numeric_limits<float>::infinity();
    for (const comm::Bucket& b : buckets) {
      if (b.dense) {
        g[b.range.offset] = -std::numeric_limits<float>::infinity();
        break;
      }
    }
  }
  for (const comm::Bucket& b : buckets) ASSERT_TRUE(x->average_bucket(*comm_, b, 1).is_ok());

  EXPECT_TRUE(ops::all_finite(e.data(), e.size())) << "a non-finite value entered a residual";
  const bool has_dense = std::any_of(buckets.begin(), buckets.end(),
                                     [](const comm::Bucket& b) { return b.dense; });
  const int expected_bad = has_dense ? 2 : 1;
  EXPECT_EQ(x->last_nonfinite_buckets_all_ranks(), expected_bad) << "every rank agrees";
  EXPECT_EQ(x->last_local_nonfinite_buckets(), comm_->rank() == bad_rank ? expected_bad : 0);
  // Every bucket but the last averaged finite messages; the last one carries the skip signal.
  for (const comm::Bucket& b : buckets) {
    const bool last = static_cast<std::size_t>(b.index) + 1 == buckets.size();
    for (std::int64_t i = b.range.offset; i < b.range.end(); ++i) {
      ASSERT_EQ(std::isnan(g[i]), last) << "bucket " << b.index << " at " << i;
    }
  }
  if (comm_->rank() == bad_rank) {
    // The bad buckets went out without error feedback: the residual is bitwise the old one.
    const auto lo = static_cast<std::size_t>(poisoned->range.offset);
    const auto hi = static_cast<std::size_t>(poisoned->range.end());
    for (std::size_t i = lo; i < hi; ++i) ASSERT_EQ(e[i], before[i]) << "residual at " << i;
  }

  // The next clean step runs normally on every rank.
  f.fill_grads(31 + static_cast<std::uint32_t>(comm_->rank()));
  for (const comm::Bucket& b : buckets) ASSERT_TRUE(x->average_bucket(*comm_, b, 2).is_ok());
  EXPECT_EQ(x->last_nonfinite_buckets_all_ranks(), 0);
  EXPECT_TRUE(ops::all_finite(f.stack.store.grads(),
                              static_cast<std::size_t>(f.stack.store.flat_numel())));
}

INSTANTIATE_TEST_SUITE_P(Strategies, NonfiniteExchangeMpi,
                         ::testing::Values("topk", "lbs", "two_phase", "gtopk", "qsgd", "powersgd"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace sparq::compress
