// Note [Non-finite local gradients] (gradient_exchange.h) under mpirun: a NaN or Inf in one
// rank's gradient never reaches its residual or any message, every rank still takes part in
// every collective, and every rank sees the same skip signal (a NaN aggregate in the step's last
// bucket: here the plan's last, as the test runs them in plan order) and the same count of bad
// buckets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "comm/mpi_communicator.h"
#include "compress/registry.h"
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
  // The bad rank reports no compression error for the skipped step: its replaced bucket kept
  // its old residual and asked nothing, which made the error look larger (review).
  EXPECT_EQ(x->rel_compression_error().has_value(), comm_->rank() != bad_rank);
  EXPECT_EQ(x->bucket_rel_errors().empty(), comm_->rank() == bad_rank);
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

// A dense f32 codec whose message from rank 1 for the span at offset 0 has one float too
// many: under two_phase only the owner of region 0 (rank 0) receives it and refuses it.
class OneBadSpan final : public Compressor {
 public:
  std::string_view name() const override { return "test_one_bad_span"; }
  Aggregation aggregation() const override { return Aggregation::kTwoPhase; }
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override {
    const bool bad = ctx.rank == 1 && ctx.offset == 0;
    msg.assign(a.size_bytes() + (bad ? 4 : 0), 0);
    std::memcpy(msg.data(), a.data(), a.size_bytes());
  }
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext&) const override {
    return check_message_size(*this, msg, n, 4 * n);
  }
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha, DecodeMode mode,
              const EncodeContext&) const override {
    const auto* v = reinterpret_cast<const float*>(msg.data());
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = (mode == DecodeMode::kSet ? 0.0f : out[i]) + alpha * v[i];
    }
  }
  // Sizes vary (the bad span): exchanged, not fixed.
  std::optional<std::size_t> fixed_message_bytes(std::size_t) const override {
    return std::nullopt;
  }
  double contraction_delta(std::size_t) const override { return 1.0; }
};

// Found in review: a bucket whose strategy failed on one rank only (a bad message is seen by
// its receiver) returned before the step's count, so that rank skipped the step's final
// agreement while the others waited in it. Now every rank completes the step; the receiver
// reports the error naming the sender, and the next step runs on every rank.
TEST(ExchangeErrorMpi, ABadMessageSeenByOneRankLeavesNoRankWaiting) {
  auto made = comm::make_mpi_communicator();
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  comm::Communicator& comm = **made;
  if (comm.size() < 2) GTEST_SKIP() << "needs two ranks";
  if (!find_compressor("test_one_bad_span").is_ok()) {
    ASSERT_TRUE(register_compressor({"test_one_bad_span",
                                     "one bad span from rank 1, for the test",
                                     {},
                                     [](ConfigReader&) -> Result<std::unique_ptr<Compressor>> {
                                       return std::unique_ptr<Compressor>(
                                           std::make_unique<OneBadSpan>());
                                     }})
                    .is_ok());
  }
  Fixture f({"*.bias"});
  GradientExchangeConfig c;
  c.compress = {"test_one_bad_span", {}, "compress"};
  c.aggregator.server_compression = false;
  auto x = f.make(c);
  ASSERT_NE(x, nullptr);
  f.fill_grads(5 + static_cast<std::uint32_t>(comm.rank()));
  int failed = 0;
  std::string message;
  for (const comm::Bucket& b : f.plan.buckets()) {
    const Status s = x->average_bucket(comm, b, 0);
    if (!s.is_ok()) {
      ++failed;
      message = s.message();
    }
  }
  // Every compressed bucket's region 0 is owned by rank 0.
  if (comm.rank() == 0) {
    EXPECT_GT(failed, 0);
    EXPECT_NE(message.find("message from rank 1"), std::string::npos) << message;
  } else {
    EXPECT_EQ(failed, 0) << message;
  }
  // Had any rank skipped a collective, this would pair unlike collectives or hang.
  std::int64_t mine = comm.rank(), sum = 0;
  comm.allreduce(&mine, &sum, 1, DType::kI64, comm::ReduceOp::kSum);
  EXPECT_EQ(sum, static_cast<std::int64_t>(comm.size()) * (comm.size() - 1) / 2);
}

INSTANTIATE_TEST_SUITE_P(Strategies, NonfiniteExchangeMpi,
                         ::testing::Values("topk", "lbs", "two_phase", "gtopk", "qsgd", "powersgd"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace sparq::compress
