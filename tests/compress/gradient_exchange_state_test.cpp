// GradientExchange's saved state (compressor and aggregator state per bucket): a restored
// exchange continues bit for bit, and state that does not fit its bucket is refused naming it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "compress/gradient_exchange.h"
#include "exchange_fixture.h"

namespace sparq::compress {
namespace {

using Fixture = testing::ExchangeFixture;
using testing::lbs_exchange_config;

void expect_saved_state_continues(Fixture& f, const GradientExchangeConfig& c) {
  auto original = f.make(c);
  for (int step = 0; step < 2; ++step) {
    f.fill_grads(20 + step);
    f.exchange_all(*original, step);
  }
  const std::vector<StateTensor> state = original->save_state();
  const std::vector<float> residual(original->residual().begin(), original->residual().end());

  auto restored = f.make(c);
  ASSERT_TRUE(restored->load_state(state, 0, 1).is_ok());
  std::copy(residual.begin(), residual.end(), restored->residual().begin());

  f.fill_grads(30);
  f.exchange_all(*original, 2);
  const std::vector<float> want = f.grads();
  f.fill_grads(30);
  f.exchange_all(*restored, 2);
  EXPECT_EQ(f.grads(), want);

  std::vector<StateTensor> truncated(state.begin(), state.end() - 1);
  const Status s = f.make(c)->load_state(truncated, 0, 1);
  EXPECT_FALSE(s.is_ok());
}

// dgc keeps momentum per bucket and two_phase a server residual: a restored exchange must
// continue exactly like the original. (dgc goes through two_phase without server
// compression: with it, the combination is refused.)
TEST(GradientExchange, SavedStateContinuesIdentically) {
  for (const bool dgc : {true, false}) {
    SCOPED_TRACE(dgc ? "dgc, two_phase without server compression" : "lbs, two_phase");
    Fixture f;
    GradientExchangeConfig c;
    c.compress = dgc ? CompressConfig{"dgc", {{"density", "0.05"}, {"momentum", "0.9"}}, "compress"}
                     : CompressConfig{"lbs", {{"density", "0.05"}}, "compress"};
    c.aggregation = "two_phase";
    c.aggregator.server_compression = !dgc;
    expect_saved_state_continues(f, c);
  }
}

// A state saved for other buckets (another comm.bucket_mb) or another world size is refused
// naming the bucket, not applied to other positions (dgc's momentum) or left to abort the
// first exchange (two_phase's server residual of another region size).
TEST(GradientExchange, StateThatDoesNotFitItsBucketIsRefusedNamingIt) {
  Fixture f;
  GradientExchangeConfig dgc;
  dgc.compress = {"dgc", {{"density", "0.05"}}, "compress"};
  auto original = f.make(dgc);
  f.fill_grads(40);
  f.exchange_all(*original, 0);
  std::vector<StateTensor> state = original->save_state();
  // Two compressed buckets of different sizes swap their momenta.
  const comm::Bucket* first = nullptr;
  const comm::Bucket* second = nullptr;
  for (const comm::Bucket& b : f.plan.buckets()) {
    if (b.dense) continue;
    if (first == nullptr) {
      first = &b;
    } else if (b.range.count != first->range.count) {
      second = &b;
      break;
    }
  }
  ASSERT_TRUE(first != nullptr && second != nullptr) << "needs two buckets of other sizes";
  const auto find = [&](const comm::Bucket& b) {
    const std::string name = fmt::format("bucket{}.compressor", b.index);
    return std::find_if(state.begin(), state.end(),
                        [&](const StateTensor& s) { return s.name == name; });
  };
  ASSERT_NE(find(*first), state.end());
  ASSERT_NE(find(*second), state.end());
  std::swap(find(*first)->tensor, find(*second)->tensor);
  Status s = f.make(dgc)->load_state(state, 0, 1);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(fmt::format("bucket{}.compressor: the saved state does not fit "
                                         "bucket {} ({} floats",
                                         first->index, first->index, first->range.count)),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("dgc momentum"), std::string::npos) << s.message();

  // two_phase's server residual of the whole bucket (one rank) is not rank 1's region of two.
  GradientExchangeConfig two_phase = lbs_exchange_config();
  two_phase.aggregation = "two_phase";
  auto one_rank = f.make(two_phase);
  f.fill_grads(41);
  f.exchange_all(*one_rank, 0);
  s = f.make(two_phase)->load_state(one_rank->save_state(), 1, 2);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("aggregator: the saved state does not fit bucket"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("two_phase server residual"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 1 of 2"), std::string::npos) << s.message();
  // And as saved, it loads.
  EXPECT_TRUE(f.make(two_phase)->load_state(one_rank->save_state(), 0, 1).is_ok());
}

}  // namespace
}  // namespace sparq::compress
