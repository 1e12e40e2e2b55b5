// The optimizer modes of optim.communicate (optimizer.h) through a real GradientExchange with
// error feedback, on one rank (Self communicator): what the parameters moved by plus what is
// still in the residual equals what the optimizer asked to send, step after step (mass
// conservation), for the error-compensated update (communicate: update) and for the frozen-
// variance momentum (communicate: momentum). A rule that adopted the aggregate as momentum, or
// an update that skipped the learning rate or the residual, breaks these identities.
// Multi-rank equivalence is in data_parallel_mpi_test; resume in train_app_test.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "comm/bucket_plan.h"
#include "comm/communicator.h"
#include "comm/stack_fixture.h"
#include "compress/gradient_exchange.h"
#include "core/rng.h"
#include "optim/optimizer.h"

namespace sparq::train {
namespace {

constexpr int kSteps = 12;
constexpr double kLr = 0.01;

struct ExchangeRig {
  comm::BucketPlanConfig plan_config = [] {
    comm::BucketPlanConfig c;
    c.first_bucket_mb = 0.01;
    c.bucket_mb = 0.02;
    return c;
  }();
  comm::testing::Stack stack = comm::testing::make_stack(2, 32, plan_config);
  comm::BucketPlan plan = comm::BucketPlan::build(stack.store, stack.layers, plan_config).value();
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  std::unique_ptr<compress::GradientExchange> exchange;
  std::unique_ptr<optim::Optimizer> optimizer;

  ExchangeRig(const optim::OptimConfig& oc, std::int64_t dense_warmup) {
    ParamStore& s = stack.store;
    fill_normal(s.params(), static_cast<std::size_t>(s.flat_numel()), 0.0f, 0.1f, 3, 1);
    compress::GradientExchangeConfig xc;
    xc.compress = {"topk", {{"density", "0.05"}}, "compress"};
    xc.dense_warmup_steps = dense_warmup;
    exchange = std::move(compress::GradientExchange::create(s, plan, xc)).value();
    optimizer = std::move(optim::make_optimizer(oc, s)).value();
  }

  const ParamStore& store() const { return stack.store; }
  std::vector<double> params() const {
    return {store().params(), store().params() + store().flat_numel()};
  }

  // One step as DataParallelStepper runs it (tensor by tensor, no clipping); returns what the
  // optimizer put into the gradient buffer to be sent.
  std::vector<double> step(std::int64_t step) {
    const ParamStore& s = store();
    // Tensors only: the padding between them stays zero, as a model leaves it.
    for (const ParamEntry& e : s.entries()) {
      fill_normal(s.grads() + e.offset, static_cast<std::size_t>(e.numel), 0.0f, 1.0f, 9,
                  static_cast<std::uint64_t>(step * 1000 + e.offset));
    }
    for (const ParamEntry& e : s.entries()) optimizer->before_communication(step, e.range());
    std::vector<double> sent(s.grads(), s.grads() + s.flat_numel());
    for (const comm::Bucket& b : plan.buckets()) {
      EXPECT_TRUE(exchange->average_bucket(*self, b, step).is_ok());
    }
    optimizer->step(kLr);
    stack.store.zero_grads();
    return sent;
  }
};

// |a - b| within float rounding of sums over kSteps values of size ~scale.
void expect_close(double got, double want, double scale, const char* what, std::int64_t i) {
  ASSERT_NEAR(got, want, 1e-5 * scale) << what << " element " << i;
}

TEST(OptimizerModes, UpdateModeMovesTheParametersBySentUpdatesMinusTheResidual) {
  // SGD without decay: p_T = p_0 - lr * (sum of directions - residual), exactly the
  // error-feedback identity seen through the optimizer. Adam: the same with Adam's directions.
  for (const char* name : {"sgd", "adam"}) {
    optim::OptimConfig oc;
    oc.name = name;
    oc.momentum = 0.9;
    oc.communicate = "update";
    ExchangeRig s(oc, 0);
    const std::vector<double> p0 = s.params();
    std::vector<double> sum_sent(p0.size(), 0.0);
    for (int t = 0; t < kSteps; ++t) {
      const std::vector<double> sent = s.step(t);
      for (std::size_t i = 0; i < sent.size(); ++i) sum_sent[i] += sent[i];
    }
    const std::vector<double> p = s.params();
    const std::span<float> e = s.exchange->residual();
    double residual_sq = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      // Dense buckets (biases, norms) have no residual: their sum is applied in full.
      const double pending = e.empty() ? 0.0 : e[i];
      residual_sq += pending * pending;
      expect_close(p[i], p0[i] - kLr * (sum_sent[i] - pending), kLr * kSteps, name,
                   static_cast<std::int64_t>(i));
    }
    EXPECT_GT(residual_sq, 0.0) << name << ": topk at 5% must leave mass pending";
  }
}

TEST(OptimizerModes, FrozenMomentumModeAppliesEverySentMomentumOverTheFrozenVariance) {
  // AdamW without decay, frozen after 3 dense steps: from then on
  //   p_T - p_F = -sum over steps t of lr_t / (sqrt(v_hat) + eps) * aggregate_t
  // element by element, with v the frozen (floored) variance, lr_t = lr / (1 - b1^(t+1)) (m's
  // bias correction goes on, adam.h) and aggregate_t what error feedback let through at t:
  // the momentum sent plus the residual before minus the residual after. So every sent
  // momentum is applied once, or is still in the residual.
  optim::OptimConfig oc;
  oc.name = "adamw";
  oc.communicate = "momentum";
  oc.freeze_steps = 3;
  ExchangeRig s(oc, 3);
  for (int t = 0; t < 3; ++t) s.step(t);
  const std::vector<double> p_frozen = s.params();
  // sum over t of lr_t * aggregate_t, element by element
  std::vector<double> applied(p_frozen.size(), 0.0);
  std::vector<double> v_frozen;
  const std::span<float> e = s.exchange->residual();
  ASSERT_FALSE(e.empty());
  for (int t = 3; t < kSteps; ++t) {
    const std::vector<float> e_before(e.begin(), e.end());
    const std::vector<double> sent = s.step(t);
    if (t == 3) {
      const Tensor v = s.optimizer->state()[1].tensor;
      v_frozen.assign(v.data<float>(), v.data<float>() + v.numel());
    }
    const double lr_t = kLr / (1.0 - std::pow(oc.beta1, t + 1));
    for (std::size_t i = 0; i < sent.size(); ++i) {
      applied[i] += lr_t * (sent[i] + e_before[i] - e[i]);
    }
  }
  const double inv_sqrt_bc2 = 1.0 / std::sqrt(1.0 - std::pow(oc.beta2, 3));
  const std::vector<double> p = s.params();
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double denom = std::sqrt(v_frozen[i]) * inv_sqrt_bc2 + oc.eps;
    const double want = p_frozen[i] - applied[i] / denom;
    expect_close(p[i], want, kLr * kSteps / denom, "adamw momentum", static_cast<std::int64_t>(i));
  }
}

}  // namespace
}  // namespace sparq::train
