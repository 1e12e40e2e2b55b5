// Optimizers against closed-form single steps and against PyTorch (reference values written
// by tests/reference/gen_optim.py from the same formula-defined inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "optim/adam.h"
#include "optim/optimizer.h"

namespace sparq::optim {
namespace {

constexpr int kTrajectorySteps = 5;

ParamStore make_weight_bias_store() {
  ParamStore s;
  s.add({"weight", {7, 5}, Init::zeros(), true});
  s.add({"bias", {11}, Init::zeros(), false});
  s.allocate();
  return s;
}

double tensor_offset(const std::string& name) { return name == "weight" ? 1.0 : 2.0; }

void set_initial(ParamStore& s) {
  for (const auto& e : s.entries()) {
    float* p = s.param(e.spec.name).data<float>();
    for (std::int64_t i = 0; i < e.numel; ++i) {
      p[i] = static_cast<float>(std::sin(0.37 * i + tensor_offset(e.spec.name)));
    }
  }
}

void set_trajectory_grads(ParamStore& s, int step) {
  for (const auto& e : s.entries()) {
    float* g = s.grad(e.spec.name).data<float>();
    for (std::int64_t i = 0; i < e.numel; ++i) {
      g[i] = static_cast<float>(0.5 * std::cos(0.11 * i * (step + 1) + tensor_offset(e.spec.name)));
    }
  }
}

using ReferenceTrajectories = std::map<std::string, std::map<std::string, std::vector<float>>>;

ReferenceTrajectories load_reference() {
  std::ifstream in(std::string(SPARQ_SOURCE_DIR) + "/tests/reference/optim/optim_reference.txt");
  EXPECT_TRUE(in.good()) << "missing tests/reference/optim/optim_reference.txt";
  ReferenceTrajectories ref;
  std::string line, current;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string head;
    ls >> head;
    if (head == "case") {
      ls >> current;
      continue;
    }
    std::vector<float>& values = ref[current][head];
    float v;
    while (ls >> v) values.push_back(v);
  }
  return ref;
}

struct Case {
  const char* name;
  OptimConfig config;
  double lr;
};

OptimConfig sgd(double momentum, double dampening, bool nesterov, double wd) {
  OptimConfig c;
  c.name = "sgd";
  c.momentum = momentum;
  c.dampening = dampening;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  return c;
}

OptimConfig adam(const char* name, double beta2, double wd) {
  OptimConfig c;
  c.name = name;
  c.beta2 = beta2;
  c.weight_decay = wd;
  return c;
}

TEST(Optimizers, MatchPyTorchOverFiveSteps) {
  const ReferenceTrajectories ref = load_reference();
  const Case cases[] = {
      {"sgd_plain", sgd(0, 0, false, 0.01), 0.1},
      {"sgd_momentum", sgd(0.9, 0.1, false, 0.01), 0.1},
      {"sgd_nesterov", sgd(0.9, 0, true, 0.01), 0.1},
      {"adam", adam("adam", 0.999, 0.01), 0.01},
      {"adamw", adam("adamw", 0.95, 0.1), 0.01},
  };
  for (const Case& c : cases) {
    ParamStore s = make_weight_bias_store();
    set_initial(s);
    auto opt = make_optimizer(c.config, s);
    ASSERT_TRUE(opt.is_ok()) << opt.status().message();
    for (int step = 0; step < kTrajectorySteps; ++step) {
      set_trajectory_grads(s, step);
      (*opt)->before_communication(step, {0, s.flat_numel()});
      (*opt)->step(c.lr);
    }
    ASSERT_TRUE(ref.count(c.name)) << c.name;
    for (const auto& e : s.entries()) {
      const std::vector<float>& want = ref.at(c.name).at(e.spec.name);
      ASSERT_EQ(static_cast<std::int64_t>(want.size()), e.numel);
      const float* got = s.param(e.spec.name).data<float>();
      for (std::int64_t i = 0; i < e.numel; ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i])))
            << c.name << " " << e.spec.name << "[" << i << "]";
      }
    }
  }
}

TEST(Optimizers, ClosedFormFirstSteps) {
  // SGD without momentum: p1 = p0 - lr (g + wd p0) on decayed tensors, p0 - lr g otherwise.
  ParamStore s = make_weight_bias_store();
  set_initial(s);
  const float w0 = s.param("weight").data<float>()[3], b0 = s.param("bias").data<float>()[3];
  set_trajectory_grads(s, 0);
  const float gw = s.grad("weight").data<float>()[3], gb = s.grad("bias").data<float>()[3];
  auto opt = make_optimizer(sgd(0, 0, false, 0.5), s);
  (*opt)->step(0.1);
  EXPECT_FLOAT_EQ(s.param("weight").data<float>()[3], w0 - 0.1f * (gw + 0.5f * w0));
  EXPECT_FLOAT_EQ(s.param("bias").data<float>()[3], b0 - 0.1f * gb);

  // Adam's first step moves every parameter by lr * g / (|g| + eps') = lr * sign(g).
  ParamStore a = make_weight_bias_store();
  set_initial(a);
  set_trajectory_grads(a, 0);
  const float a0 = a.param("weight").data<float>()[2], ga = a.grad("weight").data<float>()[2];
  auto adam_opt = make_optimizer(adam("adam", 0.999, 0.0), a);
  (*adam_opt)->step(0.01);
  EXPECT_NEAR(a.param("weight").data<float>()[2], a0 - 0.01f * (ga > 0 ? 1.0f : -1.0f), 1e-6);
}

TEST(Optimizers, StateRestoreContinuesIdentically) {
  ParamStore a = make_weight_bias_store(), b = make_weight_bias_store();
  set_initial(a);
  auto oa = make_optimizer(adam("adamw", 0.95, 0.1), a);
  for (int step = 0; step < 3; ++step) {
    set_trajectory_grads(a, step);
    (*oa)->step(0.01);
  }
  // Copy parameters and state into a fresh optimizer, as a checkpoint would.
  std::copy(a.params(), a.params() + a.flat_numel(), b.params());
  auto ob = make_optimizer(adam("adamw", 0.95, 0.1), b);
  auto sa = (*oa)->state(), sb = (*ob)->state();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    ASSERT_EQ(sa[i].name, sb[i].name);
    const float* from = sa[i].tensor.data<float>();
    std::copy(from, from + sa[i].tensor.numel(), sb[i].tensor.data<float>());
  }
  (*ob)->set_steps_taken((*oa)->steps_taken());
  for (int step = 3; step < 5; ++step) {
    set_trajectory_grads(a, step);
    set_trajectory_grads(b, step);
    (*oa)->step(0.01);
    (*ob)->step(0.01);
  }
  for (std::int64_t i = 0; i < a.flat_numel(); ++i) ASSERT_EQ(a.params()[i], b.params()[i]);
}

TEST(Optimizers, FrozenVarianceAdamCommunicatesMomentum) {
  // With freeze_steps = 2: steps 0 and 1 are plain Adam; from step 2 the gradient buffer is
  // replaced by the local momentum, which stays this rank's m (Note [Sparse momentum rule]),
  // and v stops changing (no floor here: frozen_variance_floor = 0).
  ParamStore s = make_weight_bias_store();
  set_initial(s);
  OptimConfig c = adam("adam", 0.999, 0.0);
  c.communicate = "momentum";
  c.freeze_steps = 2;
  c.frozen_variance_floor = 0.0;
  auto opt = make_optimizer(c, s);
  auto* adam_opt = dynamic_cast<Adam*>(opt->get());
  ASSERT_NE(adam_opt, nullptr);
  for (int step = 0; step < 2; ++step) {
    set_trajectory_grads(s, step);
    adam_opt->before_communication(step, {0, s.flat_numel()});
    adam_opt->step(0.01);
  }
  const auto state = adam_opt->state();
  const float* m = state[0].tensor.data<float>();
  const float* v = state[1].tensor.data<float>();
  const std::vector<float> m_before(m, m + state[0].tensor.numel());
  const std::vector<float> v_before(v, v + state[1].tensor.numel());
  set_trajectory_grads(s, 2);
  const std::int64_t off = s.entry("weight").offset + 4;
  const float g = s.grads()[off];
  EXPECT_FALSE(adam_opt->communicates_momentum(1));
  EXPECT_TRUE(adam_opt->communicates_momentum(2));
  // Range by range, as the scheduler's callback does it: the bias first, then the weight.
  adam_opt->before_communication(2, s.entry("bias").range());
  EXPECT_EQ(s.grads()[off], g);  // the weight is not touched by the bias' range
  adam_opt->before_communication(2, s.entry("weight").range());
  EXPECT_FLOAT_EQ(s.grads()[off], 0.9f * m_before[off] + 0.1f * g);
  EXPECT_EQ(m[off], s.grads()[off]);  // this rank's momentum advanced
  const float p_before = s.params()[off];
  const float local_m = m[off];
  // Another rank's momentum made the aggregate: it is applied, not adopted.
  const float aggregate = 0.5f * (local_m + 0.25f);
  s.grads()[off] = aggregate;
  adam_opt->step(0.01);
  EXPECT_EQ(v[off], v_before[off]);  // variance frozen
  EXPECT_EQ(m[off], local_m);        // m stays the local momentum
  const float v_hat = v_before[off] / static_cast<float>(1.0 - std::pow(0.999, 2));
  // The third Adam step: m's bias correction 1 - b1^3 (adam.h) goes on through the freeze.
  const float step_size = static_cast<float>(0.01 / (1.0 - std::pow(0.9, 3)));
  EXPECT_NEAR(s.params()[off], p_before - step_size * aggregate / (std::sqrt(v_hat) + 1e-8f), 1e-6);
}

// AdamW sending its momentum from step `freeze`, with the variance floor `floor`.
OptimConfig momentum_adamw(std::int64_t freeze, double floor) {
  OptimConfig c = adam("adamw", 0.999, 0.0);
  c.communicate = "momentum";
  c.freeze_steps = freeze;
  c.frozen_variance_floor = floor;
  return c;
}

// The floor of tensor `w`'s v at the freeze: floor x its mean, in double (adam.cpp).
float variance_floor(const float* v, const ParamEntry& w, double floor) {
  double sum = 0;
  for (std::int64_t i = 0; i < w.numel; ++i) sum += v[w.offset + i];
  return static_cast<float>(floor * sum / static_cast<double>(w.numel));
}

TEST(Optimizers, FrozenVarianceIsFlooredOnceAtTheFreeze) {
  // A coordinate whose gradient was zero through the warm-up has v = 0; frozen as it is, any
  // momentum it gets later would be divided by eps. The floor raises it to floor x its
  // tensor's mean v at the freeze, and only then (resume at a later step must not re-floor).
  ParamStore s = make_weight_bias_store();
  set_initial(s);
  auto opt = make_optimizer(momentum_adamw(2, 0.1), s);
  ASSERT_TRUE(opt.is_ok());
  const ParamEntry& w = s.entry("weight");
  for (int step = 0; step < 2; ++step) {
    set_trajectory_grads(s, step);
    s.grads()[w.offset] = 0.0f;  // never seen during the warm-up
    (*opt)->step(0.01);
  }
  const float* v = (*opt)->state()[1].tensor.data<float>();
  ASSERT_EQ(v[w.offset], 0.0f);
  const float low = variance_floor(v, w, 0.1);
  const std::vector<float> before(v + w.offset, v + w.offset + w.numel);
  set_trajectory_grads(s, 2);
  (*opt)->before_communication(2, {0, s.flat_numel()});
  (*opt)->step(0.01);
  for (std::int64_t i = 0; i < w.numel; ++i) {
    ASSERT_EQ(v[w.offset + i], std::max(before[static_cast<std::size_t>(i)], low)) << i;
  }
  EXPECT_GT(v[w.offset], 0.0f);
  const std::vector<float> floored(v + w.offset, v + w.offset + w.numel);
  set_trajectory_grads(s, 3);
  (*opt)->before_communication(3, {0, s.flat_numel()});
  (*opt)->step(0.01);
  for (std::int64_t i = 0; i < w.numel; ++i) ASSERT_EQ(v[w.offset + i], floored[static_cast<std::size_t>(i)]);
}

TEST(Optimizers, ASkippedStepBeforeTheFreezeDoesNotMoveIt) {
  // Note [The trainer's step decides the freeze]: step 1 is skipped (non-finite aggregate:
  // before_communication ran, step() did not), so the optimizer has taken 2 steps when the
  // trainer reaches step 3 = freeze_steps. The buffer then holds momentum, and step() must
  // apply it frozen: v as floored at the freeze, m this rank's local momentum.
  ParamStore s = make_weight_bias_store();
  set_initial(s);
  auto opt = make_optimizer(momentum_adamw(3, 0.1), s);
  ASSERT_TRUE(opt.is_ok());
  for (int step = 0; step < 3; ++step) {
    set_trajectory_grads(s, step);
    (*opt)->before_communication(step, {0, s.flat_numel()});
    if (step != 1) (*opt)->step(0.01);
    s.zero_grads();
  }
  ASSERT_EQ((*opt)->steps_taken(), 2);
  const auto state = (*opt)->state();
  const float* m = state[0].tensor.data<float>();
  const float* v = state[1].tensor.data<float>();
  const ParamEntry& w = s.entry("weight");
  const float low = variance_floor(v, w, 0.1);
  const std::vector<float> v_before(v + w.offset, v + w.offset + w.numel);

  set_trajectory_grads(s, 3);
  (*opt)->before_communication(3, {0, s.flat_numel()});
  for (std::int64_t i = 0; i < w.numel; ++i) {
    ASSERT_EQ(v[w.offset + i], std::max(v_before[static_cast<std::size_t>(i)], low)) << i;
  }
  const std::vector<float> floored(v + w.offset, v + w.offset + w.numel);
  const std::vector<float> local_m(m + w.offset, m + w.offset + w.numel);
  for (std::int64_t i = 0; i < w.numel; ++i) {
    ASSERT_EQ(s.grads()[w.offset + i], local_m[static_cast<std::size_t>(i)]) << "momentum sent";
  }
  const float p_before = s.params()[w.offset + 1];
  const float aggregate = s.grads()[w.offset + 1];
  (*opt)->step(0.01);
  for (std::int64_t i = 0; i < w.numel; ++i) {
    ASSERT_EQ(v[w.offset + i], floored[static_cast<std::size_t>(i)]) << "v moved at " << i;
    ASSERT_EQ(m[w.offset + i], local_m[static_cast<std::size_t>(i)]) << "m moved at " << i;
  }
  // Note [Frozen variance's bias correction]: v had 2 updates (step 1 was skipped), so it is
  // corrected for 2, not for freeze_steps = 3.
  const float v_hat = floored[1] / static_cast<float>(1.0 - std::pow(0.999, 2));
  // The third Adam step taken: m's correction 1 - b1^3 (adam.h).
  const float step_size = static_cast<float>(0.01 / (1.0 - std::pow(0.9, 3)));
  EXPECT_NEAR(s.params()[w.offset + 1],
              p_before - step_size * aggregate / (std::sqrt(v_hat) + 1e-8f), 1e-6);
}

TEST(Optimizers, UpdateModeOnOneRankEqualsThePlainOptimizer) {
  // communicate: update with nothing compressed on one rank: the "aggregate" is this rank's
  // own direction, so the parameters follow the plain optimizer (to float rounding: the
  // learning rate multiplies the direction instead of the moment).
  for (const char* name : {"adamw", "adam", "sgd"}) {
    ParamStore a = make_weight_bias_store(), b = make_weight_bias_store();
    set_initial(a);
    set_initial(b);
    OptimConfig plain = std::string(name) == "sgd" ? sgd(0.9, 0.0, true, 0.01) : adam(name, 0.99, 0.05);
    OptimConfig update = plain;
    update.communicate = "update";
    auto oa = make_optimizer(plain, a);
    auto ob = make_optimizer(update, b);
    ASSERT_TRUE(oa.is_ok() && ob.is_ok());
    EXPECT_FALSE((*oa)->sends_update());
    EXPECT_TRUE((*ob)->sends_update());
    for (int step = 0; step < 6; ++step) {
      set_trajectory_grads(a, step);
      set_trajectory_grads(b, step);
      for (const ParamEntry& e : b.entries()) (*ob)->before_communication(step, e.range());
      (*oa)->step(0.01);
      (*ob)->step(0.01);
    }
    for (std::int64_t i = 0; i < a.flat_numel(); ++i) {
      ASSERT_NEAR(a.params()[i], b.params()[i], 1e-6 * (1.0 + std::fabs(a.params()[i])))
          << name << " element " << i;
    }
  }
}

TEST(Optimizers, BadConfigsNameTheKey) {
  ParamStore s = make_weight_bias_store();
  OptimConfig c;
  c.name = "lamb";
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.name"), std::string::npos);
  c = OptimConfig{};
  c.beta2 = 1.0;
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.beta2"), std::string::npos);
  c = sgd(0.0, 0.0, true, 0.0);
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.nesterov"), std::string::npos);
  c = sgd(0.9, 0.0, false, -1.0);
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.weight_decay"), std::string::npos);
  c = sgd(0.9, 0.0, false, 0.0);
  c.communicate = "momentum";
  c.freeze_steps = 10;
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.communicate"), std::string::npos);
  c = adam("adamw", 0.999, 0.0);
  c.freeze_steps = 10;  // a freeze without communicate: momentum
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.freeze_steps"), std::string::npos);
  c.freeze_steps = 0;
  c.communicate = "momentum";  // momentum without a warm-up to estimate the variance
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.freeze_steps"), std::string::npos);
  c.communicate = "gradients";
  EXPECT_NE(make_optimizer(c, s).status().message().find("optim.communicate"), std::string::npos);
}

}  // namespace
}  // namespace sparq::optim
