// A GradientExchange on one rank (Self communicator) over a GPT-2-shaped parameter stack with
// small buckets, for the exchange's tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/stack_fixture.h"
#include "compress/gradient_exchange.h"
#include "core/rng.h"

namespace sparq::compress::testing {

struct ExchangeFixture {
  comm::BucketPlanConfig plan_config;
  comm::testing::Stack stack;
  comm::BucketPlan plan;
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();

  explicit ExchangeFixture(std::vector<std::string> dense_patterns = {})
      : plan_config(make_plan_config(std::move(dense_patterns))),
        stack(comm::testing::make_stack(2, 32, plan_config)),
        plan(comm::BucketPlan::build(stack.store, stack.layers, plan_config).value()) {}

  static comm::BucketPlanConfig make_plan_config(std::vector<std::string> dense_patterns) {
    comm::BucketPlanConfig c;
    c.first_bucket_mb = 0.01;
    c.bucket_mb = 0.02;
    c.dense_patterns = std::move(dense_patterns);
    return c;
  }

  void fill_grads(std::uint32_t seed) {
    const ParamStore& s = stack.store;
    fill_normal(s.grads(), static_cast<std::size_t>(s.flat_numel()), 0.0f, 1.0f, seed, 7);
  }
  std::vector<float> grads() const {
    const ParamStore& s = stack.store;
    return {s.grads(), s.grads() + s.flat_numel()};
  }
  std::unique_ptr<GradientExchange> make(GradientExchangeConfig config) {
    auto x = GradientExchange::create(stack.store, plan, config);
    EXPECT_TRUE(x.is_ok()) << x.status().message();
    return x.is_ok() ? std::move(x).value() : nullptr;
  }
  void exchange_all(GradientExchange& x, std::int64_t step) {
    for (const comm::Bucket& b : plan.buckets()) {
      ASSERT_TRUE(x.average_bucket(*self, b, step).is_ok());
    }
  }
};

// lbs at 5% and 4 bits with a fixed seed: the exchange most of these tests drive.
inline GradientExchangeConfig lbs_exchange_config() {
  GradientExchangeConfig c;
  c.compress = {"lbs", {{"density", "0.05"}, {"bits", "4"}}, "compress"};
  c.seed = 11;
  return c;
}

}  // namespace sparq::compress::testing
