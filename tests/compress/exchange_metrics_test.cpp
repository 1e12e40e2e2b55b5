// The exchange's step metrics on one rank: the relative compression error ||e|| / ||a||
// against a direct computation, the send history against the decoded messages, and that
// neither changes a sent or kept float. Multi-rank regions: aggregation_mpi_test.
#include <gtest/gtest.h>

#include <cmath>

#include "compress/error_feedback.h"
#include "compress/send_history.h"
#include "exchange_fixture.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

using Fixture = testing::ExchangeFixture;

GradientExchangeConfig config_for(const std::string& name, std::map<std::string, std::string> p,
                                  std::string aggregation = "auto") {
  GradientExchangeConfig c;
  c.compress = {name, std::move(p), "compress"};
  c.aggregation = aggregation;
  c.seed = 5;
  return c;
}

double sum_squares(std::span<const float> x) {
  double s = 0;
  for (float v : x) s += double(v) * v;
  return s;
}

TEST(ErrorFeedbackStats, InputSqSumsTheRegionsEncoded) {
  const std::size_t n = 1000;
  std::vector<float> residual = testing::normal_vector(n, 3, 0.1f);
  const std::vector<float> g = testing::normal_vector(n, 4);
  std::vector<float> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = g[i] + residual[i];  // what accumulate forms
  auto c = testing::make("lbs", {{"density", "0.1"}});
  ErrorFeedback ef(residual);
  ef.begin_step();
  Message msg;
  EncodeContext ctx;
  for (std::size_t begin : {std::size_t{0}, std::size_t{400}}) {  // two regions, as two_phase
    const std::size_t len = begin == 0 ? 400 : n - 400;
    ctx.offset = begin;
    ef.encode(*c, std::span(g).subspan(begin, len), begin, ctx, msg);
  }
  EXPECT_NEAR(ef.input_sq(), sum_squares(a), 1e-9 * sum_squares(a));
  ef.begin_step();
  EXPECT_EQ(ef.input_sq(), 0.0);
}

// Per bucket ||e_new|| / ||g + e_old|| computed here from the floats themselves, for every
// strategy that forms the residual its own way.
TEST(ExchangeMetrics, RelativeErrorIsTheResidualOverWhatWasAskedToBeSent) {
  const GradientExchangeConfig cases[] = {
      config_for("lbs", {{"density", "0.05"}}),
      config_for("topk", {{"density", "0.1"}}, "two_phase"),
      config_for("gtopk", {{"density", "0.1"}}),
      config_for("blockquant", {{"bits", "2"}}),
      config_for("dgc", {{"density", "0.05"}, {"momentum", "0"}}),
      config_for("powersgd", {{"rank", "1"}, {"min_compress_numel", "64"}}),
  };
  for (const GradientExchangeConfig& c : cases) {
    Fixture f;
    auto x = f.make(c);
    std::vector<float> carried(x->residual().size(), 0.0f);
    for (int step = 0; step < 3; ++step) {
      f.fill_grads(40 + step);
      const std::vector<float> g = f.grads();
      f.exchange_all(*x, step);
      const std::span<const float> e = x->residual();
      double all_e = 0, all_a = 0;
      std::vector<double> want;
      for (const comm::Bucket& b : f.plan.buckets()) {
        double esq = 0, asq = 0;
        for (std::int64_t i = b.range.offset; i < b.range.end(); ++i) {
          const float a = g[i] + carried[i];
          asq += double(a) * a;
          esq += double(e[i]) * e[i];
        }
        want.push_back(std::sqrt(esq / asq));
        all_e += esq;
        all_a += asq;
      }
      const std::vector<double> got = x->bucket_rel_errors();
      ASSERT_EQ(got.size(), want.size()) << c.compress.name;
      for (std::size_t b = 0; b < want.size(); ++b) {
        EXPECT_NEAR(got[b], want[b], 1e-9 * want[b]) << c.compress.name << " bucket " << b;
        // powersgd sends 1-D tensors dense: a bucket of only those loses nothing.
        if (c.compress.name != "powersgd") {
          EXPECT_GT(want[b], 0.0) << c.compress.name;
        }
        EXPECT_LT(want[b], 1.0) << c.compress.name;
      }
      ASSERT_TRUE(x->rel_compression_error().has_value());
      EXPECT_NEAR(*x->rel_compression_error(), std::sqrt(all_e / all_a), 1e-9);
      carried.assign(e.begin(), e.end());
    }
  }
}

TEST(ExchangeMetrics, NoRelativeErrorWhenNothingWasCompressedOrNoResidualIsKept) {
  Fixture f({"*.bias", "*ln_*"});
  GradientExchangeConfig c = config_for("lbs", {{"density", "0.05"}});
  c.dense_warmup_steps = 1;
  auto x = f.make(c);
  f.fill_grads(1);
  f.exchange_all(*x, 0);  // dense warm-up
  EXPECT_FALSE(x->rel_compression_error().has_value());
  EXPECT_TRUE(x->bucket_rel_errors().empty());
  f.exchange_all(*x, 1);  // dense buckets are left out
  std::size_t compressed = 0;
  for (const comm::Bucket& b : f.plan.buckets()) compressed += b.dense ? 0 : 1;
  EXPECT_EQ(x->bucket_rel_errors().size(), compressed);

  c.error_feedback = false;
  auto plain = f.make(c);
  f.exchange_all(*plain, 1);
  EXPECT_FALSE(plain->rel_compression_error().has_value());
  auto dense = f.make(GradientExchangeConfig{});
  f.exchange_all(*dense, 0);
  EXPECT_FALSE(dense->rel_compression_error().has_value());
}

TEST(SendHistory, CountsCoordinatesNoStepOfTheWindowSent) {
  std::vector<std::uint32_t> stamps(6, 0);
  SendHistory h(stamps);
  const std::vector<std::vector<float>> decoded = {
      {1, 2, 0, 0, 0, 0},   // step 1 sends 0, 1
      {0, -1, 3, 0, 0, 0},  // step 2 sends 1, 2
      {0, 0, 0, 4, 0, 0},   // step 3 sends 3
      {0, 0, 0, 0, 0, 0},   // step 4 sends nothing
  };
  const std::size_t want_window2[] = {4, 3, 3, 5};  // unsent in steps (s - 2, s]
  for (std::uint32_t s = 1; s <= decoded.size(); ++s) {
    h.begin_step(s);
    h.mark_nonzero(0, decoded[s - 1]);
    EXPECT_EQ(h.count_unsent(2), want_window2[s - 1]) << "step " << s;
  }
  EXPECT_EQ(h.count_unsent(4), 2u);  // 4 and 5 were never sent
  h.begin_step(5);
  h.mark(5);
  EXPECT_EQ(h.count_unsent(1), 5u);
}

// never_sent_share against the decoded messages themselves: on one rank the bucket after the
// exchange IS D(m) (allgather decodes with alpha = 1), so the test keeps its own history.
TEST(ExchangeMetrics, NeverSentShareFollowsTheDecodedMessagesAndChangesNothing) {
  const int window = 3;
  for (const char* name : {"lbs", "topk"}) {
    Fixture f({"*.bias", "*ln_*"});
    GradientExchangeConfig c = config_for(name, {{"density", "0.05"}});
    c.dense_warmup_steps = 1;
    auto plain = f.make(c);
    c.never_sent_window = window;
    auto x = f.make(c);
    std::vector<int> last_sent(f.grads().size(), 0);
    for (int step = 0; step < 7; ++step) {
      f.fill_grads(60 + step);
      f.exchange_all(*plain, step);
      const std::vector<float> want = f.grads();
      f.fill_grads(60 + step);
      f.exchange_all(*x, step);
      ASSERT_EQ(f.grads(), want) << name << " step " << step;  // bit for bit
      ASSERT_TRUE(
          std::equal(x->residual().begin(), x->residual().end(), plain->residual().begin()));
      const int compressed_steps = step;  // step 0 is the dense warm-up
      std::size_t unsent = 0, total = 0;
      for (const comm::Bucket& b : f.plan.buckets()) {
        if (b.dense) continue;
        for (std::int64_t i = b.range.offset; i < b.range.end(); ++i) {
          if (step > 0 && want[i] != 0.0f) last_sent[i] = compressed_steps;
          unsent += last_sent[i] <= compressed_steps - window ? 1 : 0;
          ++total;
        }
      }
      if (compressed_steps < window) {
        EXPECT_FALSE(x->never_sent_share().has_value()) << name << " step " << step;
      } else {
        ASSERT_TRUE(x->never_sent_share().has_value()) << name << " step " << step;
        EXPECT_EQ(*x->never_sent_share(), double(unsent) / double(total)) << name;
        EXPECT_GT(unsent, 0u) << name;  // 5% a step cannot reach everything in 3 steps
      }
    }
    EXPECT_FALSE(plain->never_sent_share().has_value());
  }
}

}  // namespace
}  // namespace sparq::compress
