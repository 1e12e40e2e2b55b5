// The density warm-up (compress.density_warmup_steps): the schedule's values, every density
// compressor following EncodeContext::density, the exchange using the schedule and then
// exactly the configured density, and, when off, the exchange as it was (bit for bit).
#include <gtest/gtest.h>

#include <cmath>

#include "compress/aggregation.h"
#include "compress/options.h"
#include "compress/randomk.h"
#include "compress/sparse_format.h"
#include "compress/topk_select.h"
#include "exchange_fixture.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

using Fixture = testing::ExchangeFixture;

TEST(DensityWarmup, ScheduleDecaysFromNearOneToExactlyTheDensity) {
  const double rho = 0.01;
  const std::int64_t T = 10;
  EXPECT_DOUBLE_EQ(warmup_density(rho, 0, T), std::pow(rho, 0.1));  // t = 0: rho^(1/T)
  EXPECT_NEAR(warmup_density(rho, T / 2 - 1, T), 0.1, 1e-15);       // halfway: sqrt(rho)
  EXPECT_EQ(warmup_density(rho, T - 1, T), rho);                    // the T-th step: rho
  EXPECT_EQ(warmup_density(rho, T, T), rho);
  EXPECT_EQ(warmup_density(rho, 1000, T), rho);
  EXPECT_EQ(warmup_density(rho, 3, 0), rho);  // off
  for (std::int64_t t = 1; t < T; ++t) {
    EXPECT_LT(warmup_density(rho, t, T), warmup_density(rho, t - 1, T));
  }
}

std::size_t sparse_count(const Message& msg, std::size_t n, std::uint8_t bits) {
  return read_sparse_header(msg, n, bits, "test").count;
}

TEST(DensityWarmup, EveryDensityCompressorSendsTheContextsK) {
  const std::size_t n = 2000;
  const std::vector<float> a = testing::normal_vector(n, 8);
  EncodeContext own, warm;
  warm.density = 0.2;  // k = 400; the configured 0.01 gives 20
  for (const char* name : {"topk", "gtopk", "dgc", "lbs", "topk_sampled", "randomk"}) {
    auto c = testing::make(name, {{"density", "0.01"}});
    ASSERT_TRUE(c->density().has_value());
    EXPECT_EQ(*c->density(), 0.01);
    for (const EncodeContext* ctx : {&own, &warm}) {
      const std::size_t k = ctx->density > 0 ? 400 : 20;
      Message msg;
      c->encode(a, *ctx, msg);
      const std::string what = std::string(name) + " k " + std::to_string(k);
      const std::vector<float> d = decode_dense(*c, msg, n, *ctx);
      const auto nonzero = static_cast<std::size_t>(
          std::count_if(d.begin(), d.end(), [](float v) { return v != 0.0f; }));
      if (std::string(name) == "randomk") {
        EXPECT_EQ(msg.size(), 4 * k) << what;
        EXPECT_EQ(nonzero, k) << what;
        EXPECT_EQ(static_cast<RandomkCompressor&>(*c).positions(n, *ctx).size(), k) << what;
      } else if (std::string(name) == "topk_sampled") {
        const std::size_t count = sparse_count(msg, n, 32);
        EXPECT_GE(count, TopkSelector::sampled_min(k)) << what;
        EXPECT_LE(count, TopkSelector::sampled_max(k)) << what;
      } else if (std::string(name) == "lbs") {
        EXPECT_EQ(sparse_count(msg, n, 4), k) << what;
      } else {
        EXPECT_EQ(sparse_count(msg, n, 32), k) << what;
        EXPECT_EQ(nonzero, k) << what;
      }
    }
  }
  // Compressors without a density have none to follow.
  for (const char* name : {"blockquant", "qsgd", "signsgd", "threshold", "none", "powersgd"}) {
    EXPECT_FALSE(testing::make(name)->density().has_value()) << name;
  }
}

GradientExchangeConfig lbs_config(std::int64_t density_warmup) {
  GradientExchangeConfig c;
  c.compress = {"lbs", {{"density", "0.05"}}, "compress"};
  c.seed = 3;
  c.dense_warmup_steps = 1;
  c.density_warmup_steps = density_warmup;
  return c;
}

TEST(DensityWarmup, ExchangeFollowsTheScheduleThenIsTheRunWithoutIt) {
  Fixture f;
  const std::int64_t T = 4;
  auto warm = f.make(lbs_config(T));
  auto plain = f.make(lbs_config(0));
  std::vector<std::size_t> payload;
  for (int step = 0; step <= T; ++step) {  // step 0: dense; steps 1..T: t = 0..T-1
    f.fill_grads(70 + step);
    f.exchange_all(*warm, step);
    payload.push_back(warm->last_payload_bytes());
  }
  for (int step = 2; step <= T; ++step) {
    EXPECT_LT(payload[step], payload[step - 1]) << "step " << step;  // k shrinks with t
  }
  // From t = T - 1 on the configured density: with the same residual and gradient, the run
  // without a warm-up gives the same floats.
  for (int step = T + 1; step < T + 3; ++step) {
    std::copy(warm->residual().begin(), warm->residual().end(), plain->residual().begin());
    f.fill_grads(70 + step);
    f.exchange_all(*plain, step);
    const std::vector<float> want = f.grads();
    const std::vector<float> want_residual(plain->residual().begin(), plain->residual().end());
    f.fill_grads(70 + step);
    f.exchange_all(*warm, step);
    EXPECT_EQ(f.grads(), want) << "step " << step;
    EXPECT_TRUE(std::equal(want_residual.begin(), want_residual.end(), warm->residual().begin()));
    EXPECT_EQ(warm->last_payload_bytes(), plain->last_payload_bytes());
  }
}

// dgc's own sparsity warm-up counts from the first compressed step: after 3 dense steps the
// first compressed step sends as many entries as step 0 of a run without a dense warm-up (it
// used to start from training step 0, so 3 dense steps used up a 3-step warm-up).
TEST(DensityWarmup, DgcOwnWarmupStartsAfterTheDenseWarmup) {
  Fixture f;
  const auto dgc = [](std::int64_t dense_warmup) {
    GradientExchangeConfig c;
    c.compress = {"dgc", {{"density", "0.01"}, {"warmup_steps", "3"}}, "compress"};
    c.seed = 3;
    c.dense_warmup_steps = dense_warmup;
    return c;
  };
  auto late = f.make(dgc(3));
  auto early = f.make(dgc(0));
  std::vector<std::size_t> late_payload, early_payload;
  for (int step = 0; step < 6; ++step) {
    f.fill_grads(90 + step);
    f.exchange_all(*late, step);
    late_payload.push_back(late->last_payload_bytes());
    f.fill_grads(90 + step);
    f.exchange_all(*early, step);
    early_payload.push_back(early->last_payload_bytes());
  }
  // The same k at the same compressed step (the index coding of other data differs a little).
  for (int t = 0; t < 3; ++t) {
    EXPECT_NEAR(static_cast<double>(late_payload[3 + t]), static_cast<double>(early_payload[t]),
                0.1 * static_cast<double>(early_payload[t]))
        << "compressed step " << t;
  }
  // Density 0.25 at the first compressed step against 0.25 x 0.04^(2/3) = 0.029 two later.
  EXPECT_GT(late_payload[3], 4 * late_payload[5]) << "the warm-up ramps down after the dense steps";
}

// density_warmup_steps = 0 (the default) leaves the exchange as it was: compressor, error
// feedback and allgather driven by hand with a context that has no density.
TEST(DensityWarmup, OffIsTheExchangeAsItWas) {
  Fixture f;
  for (const char* name : {"lbs", "randomk", "topk"}) {
    GradientExchangeConfig c = lbs_config(0);
    c.compress.name = name;
    auto x = f.make(c);
    std::vector<float> residual(x->residual().size(), 0.0f);
    std::vector<std::unique_ptr<Compressor>> compressors;
    for (std::size_t b = 0; b < f.plan.size(); ++b) {
      compressors.push_back(testing::make(name, c.compress.params));
    }
    auto gather = make_aggregator(Aggregation::kAllgather);
    for (int step = 1; step < 4; ++step) {
      f.fill_grads(90 + step);
      std::vector<float> want = f.grads();
      for (const comm::Bucket& b : f.plan.buckets()) {
        if (b.dense) continue;  // averaged exactly, as before
        const auto offset = static_cast<std::size_t>(b.range.offset);
        const auto count = static_cast<std::size_t>(b.range.count);
        ErrorFeedback ef(std::span<float>(residual).subspan(offset, count));
        EncodeContext ctx;
        ctx.seed = c.seed;
        ctx.step = step;
        ctx.bucket_id = static_cast<std::uint32_t>(b.index);
        EXPECT_TRUE(gather->run(std::span(want).subspan(offset, count), *compressors[b.index], &ef,
                                *f.self, ctx).is_ok());
      }
      f.exchange_all(*x, step);
      EXPECT_EQ(f.grads(), want) << name << " step " << step;
      EXPECT_TRUE(std::equal(residual.begin(), residual.end(), x->residual().begin())) << name;
    }
  }
}

TEST(DensityWarmup, NeedsACompressorWithADensity) {
  Fixture f;
  for (const char* name : {"blockquant", "qsgd", "powersgd"}) {
    GradientExchangeConfig c = lbs_config(5);
    c.compress = {name, {}, "compress"};
    auto x = GradientExchange::create(f.stack.store, f.plan, c);
    ASSERT_FALSE(x.is_ok()) << name;
    EXPECT_NE(x.status().message().find("compress.density_warmup_steps"), std::string::npos)
        << x.status().message();
  }
  // The dense casts send every entry: the warm-up is accepted and changes nothing, step by
  // step, against the same cast without it.
  for (const char* name : {"none", "fp16", "bf16"}) {
    GradientExchangeConfig with = lbs_config(5), without = lbs_config(0);
    with.compress = without.compress = {name, {}, "compress"};
    auto warm = GradientExchange::create(f.stack.store, f.plan, with);
    ASSERT_TRUE(warm.is_ok()) << name << ": " << warm.status().message();
    auto plain = f.make(without);
    for (int step = 0; step < 4; ++step) {
      f.fill_grads(90 + step);
      f.exchange_all(*plain, step);
      const std::vector<float> want = f.grads();
      f.fill_grads(90 + step);
      f.exchange_all(**warm, step);
      EXPECT_EQ(f.grads(), want) << name << " step " << step;
    }
  }
  GradientExchangeConfig c = lbs_config(5);
  c.compress = {"dgc", {{"warmup_steps", "3"}}, "compress"};
  auto x = GradientExchange::create(f.stack.store, f.plan, c);
  ASSERT_FALSE(x.is_ok());
  EXPECT_NE(x.status().message().find("compress.dgc.warmup_steps"), std::string::npos)
      << x.status().message();
}

}  // namespace
}  // namespace sparq::compress
