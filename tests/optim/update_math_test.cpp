// CPU-only (runs everywhere): the optimizers' per-element math, shared with the CUDA kernels
// through optim/update_math.h, reproduces the CPU optimizers BIT FOR BIT. The reference below
// is the optimizers' update rule written out as plain per-element loops (the expressions of
// the CPU loops before they were moved into update_math.h, in the same order and the same
// float/double mix; update_reference.h); the optimizers and a scalar loop over the shared
// functions (the way a CUDA thread calls them) must both give its exact bits after five steps,
// clipping included.
#include "optim/update_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/device_step.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
#include "update_reference.h"

namespace sparq::optim {
namespace {

constexpr int kSteps = 5;

// Odd sizes, with and without weight decay; "big" passes the loops' OpenMP threshold.
ParamStore make_store() {
  ParamStore s;
  s.add({"embed", {13, 7}, Init::zeros(), true});
  s.add({"w1", {37, 29}, Init::zeros(), true});
  s.add({"b1", {29}, Init::zeros(), false});
  s.add({"gain", {1}, Init::zeros(), false});
  s.add({"big", {40009}, Init::zeros(), true});
  s.add({"w2", {5, 3, 11}, Init::zeros(), true});
  s.allocate();
  for (std::size_t t = 0; t < s.entries().size(); ++t) {
    const ParamEntry& e = s.entries()[t];
    for (std::int64_t i = 0; i < e.numel; ++i) {
      s.params()[e.offset + i] = static_cast<float>(std::sin(0.37 * i + t));
    }
  }
  return s;
}

void set_grads(ParamStore& s, int step) {
  for (std::size_t t = 0; t < s.entries().size(); ++t) {
    const ParamEntry& e = s.entries()[t];
    for (std::int64_t i = 0; i < e.numel; ++i) {
      s.grads()[e.offset + i] =
          static_cast<float>(0.5 * std::cos(0.11 * i * (step + 1) + t) / (1.0 + 0.3 * t));
    }
  }
}

// The shared functions called one element at a time, as a CUDA thread calls them.
struct SharedMathLoop {
  SharedMathLoop(const OptimConfig& c, const ParamStore& s)
      : config(c), store(s), m(s.flat_numel(), 0.0f), v(s.flat_numel(), 0.0f), floor_ref(c, s) {}

  bool frozen(std::int64_t step) const {
    return config.communicate == "momentum" && step >= config.freeze_steps;
  }
  bool update_mode() const { return config.communicate == "update"; }
  float decay(const ParamEntry& e) const {
    return e.spec.weight_decay ? static_cast<float>(config.weight_decay) : 0.0f;
  }

  void before_communication(std::int64_t step) {
    if (update_mode()) {
      const SgdScalars ss = sgd_scalars(config, 1.0, steps);
      const AdamScalars as = adam_scalars(config, 1.0, steps, std::nullopt);
      for (const ParamEntry& e : store.entries()) {
        const float wd_l2 = config.name == "adamw" ? 0.0f : decay(e);
        for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
          float& g = store.grads()[i];
          g = config.name == "sgd"
                  ? sgd_local_direction(g, store.params()[i], wd_l2, ss, m[i])
                  : adam_local_direction(g, store.params()[i], wd_l2, as, m[i], v[i]);
        }
      }
      return;
    }
    if (!frozen(step)) return;
    const float b1 = static_cast<float>(config.beta1);
    const float one_minus_b1 = static_cast<float>(1.0 - config.beta1);
    for (const ParamEntry& e : store.entries()) {
      const float wd = config.name == "adam" ? decay(e) : 0.0f;
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
        store.grads()[i] =
            adam_local_momentum(store.grads()[i], store.params()[i], wd, b1, one_minus_b1, m[i]);
      }
    }
  }

  void step(double lr) {
    if (update_mode()) {
      for (const ParamEntry& e : store.entries()) {
        const float wd = config.name == "adamw" ? decay(e) : 0.0f;
        for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
          apply_averaged_update(store.grads()[i], wd, static_cast<float>(lr), store.params()[i]);
        }
      }
    } else if (config.name == "sgd") {
      const SgdScalars s = sgd_scalars(config, lr, steps);
      for (const ParamEntry& e : store.entries()) {
        for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
          float& p = store.params()[i];
          if (config.momentum > 0.0) {
            sgd_momentum_update(store.grads()[i], decay(e), s, p, m[i]);
          } else {
            sgd_plain_update(store.grads()[i], decay(e), s, p);
          }
        }
      }
    } else {
      if (frozen(steps) && steps == config.freeze_steps) {
        floor_ref.v = v;  // the floor is host code (adam.cpp), not a per-element function
        floor_ref.floor_variance();
        v = floor_ref.v;
      }
      // No step is skipped here, so v had freeze_steps updates when it froze.
      const AdamScalars s = adam_scalars(
          config, lr, steps,
          frozen(steps) ? std::optional<std::int64_t>(config.freeze_steps) : std::nullopt);
      for (const ParamEntry& e : store.entries()) {
        for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
          float& p = store.params()[i];
          if (frozen(steps)) {
            adam_frozen_update(store.grads()[i], decay(e), s, p, v[i]);
          } else {
            adam_update(store.grads()[i], decay(e), s, p, m[i], v[i]);
          }
        }
      }
    }
    ++steps;
  }

  OptimConfig config;
  const ParamStore& store;
  std::vector<float> m, v;
  Reference floor_ref;
  std::int64_t steps = 0;
};

OptimConfig make_config(const char* name, double wd) {
  OptimConfig c;
  c.name = name;
  c.weight_decay = wd;
  return c;
}

std::vector<OptimConfig> all_configs() {
  std::vector<OptimConfig> out;
  for (const char* communicate : {"gradient", "update"}) {
    OptimConfig c = make_config("sgd", 0.01);
    c.communicate = communicate;
    out.push_back(c);  // plain
    c.momentum = 0.9;
    c.dampening = 0.1;
    out.push_back(c);  // momentum with dampening
    c.dampening = 0.0;
    c.nesterov = true;
    out.push_back(c);  // nesterov
  }
  for (const char* name : {"adam", "adamw"}) {
    OptimConfig c = make_config(name, 0.05);
    c.beta2 = 0.95;
    out.push_back(c);
    c.communicate = "update";
    out.push_back(c);
    c.communicate = "momentum";
    c.freeze_steps = 2;
    out.push_back(c);
  }
  return out;
}

std::string describe(const OptimConfig& c) {
  return c.name + " communicate " + c.communicate + " momentum " + std::to_string(c.momentum) +
         " nesterov " + std::to_string(c.nesterov) + " freeze " + std::to_string(c.freeze_steps);
}

bool same_bits(const float* a, const float* b, std::int64_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

// Five steps of `config` with clipping (tight enough to bind on most steps) on the optimizer,
// the reference and the shared-function loop, each on its own store with the same start.
template <typename Check>
void run_all(const OptimConfig& config, Check&& check) {
  ParamStore a = make_store(), b = make_store(), c = make_store();
  auto opt = make_optimizer(config, a);
  ASSERT_TRUE(opt.is_ok()) << opt.status().message();
  Reference ref(config, b);
  SharedMathLoop shared(config, c);
  for (int step = 0; step < kSteps; ++step) {
    for (ParamStore* s : {&a, &b, &c}) set_grads(*s, step);
    for (const ParamEntry& e : a.entries()) (*opt)->before_communication(step, e.range());
    ref.before_communication(step);
    shared.before_communication(step);
    const double max_norm = step % 2 == 0 ? 1.5 : 1e9;
    const double norm = clip_grad_norm(a, max_norm);
    EXPECT_EQ(norm, clip_grad_norm(b, max_norm));
    EXPECT_EQ(norm, clip_grad_norm(c, max_norm));
    const double lr = 0.01 * (1.0 + step);
    (*opt)->step(lr);
    ref.step(lr);
    shared.step(lr);
  }
  check(a, **opt, b, ref, c, shared);
}

TEST(UpdateMath, CpuOptimizersMatchTheReferenceBitForBit) {
  for (const OptimConfig& config : all_configs()) {
    run_all(config, [&](const ParamStore& a, Optimizer& opt, const ParamStore& b,
                        const Reference& ref, const ParamStore&, const SharedMathLoop&) {
      EXPECT_TRUE(same_bits(a.params(), b.params(), a.flat_numel())) << describe(config);
      const std::vector<StateTensor> state = opt.state();
      if (config.name == "sgd") {
        ASSERT_EQ(state.size(), config.momentum > 0.0 ? 1u : 0u);
      } else {
        ASSERT_EQ(state.size(), 2u);
        EXPECT_TRUE(same_bits(state[1].tensor.data<float>(), ref.v.data(), a.flat_numel()))
            << describe(config);
      }
      if (!state.empty()) {
        EXPECT_TRUE(same_bits(state[0].tensor.data<float>(), ref.m.data(), a.flat_numel()))
            << describe(config);
      }
    });
  }
}

TEST(UpdateMath, SharedFunctionsOneElementAtATimeMatchTheReferenceBitForBit) {
  for (const OptimConfig& config : all_configs()) {
    run_all(config, [&](const ParamStore&, Optimizer&, const ParamStore& b, const Reference& ref,
                        const ParamStore& c, const SharedMathLoop& shared) {
      EXPECT_TRUE(same_bits(c.params(), b.params(), b.flat_numel())) << describe(config);
      EXPECT_TRUE(same_bits(shared.m.data(), ref.m.data(), b.flat_numel())) << describe(config);
      EXPECT_TRUE(same_bits(shared.v.data(), ref.v.data(), b.flat_numel())) << describe(config);
    });
  }
}

// Note [Local state and non-finite gradients]: a NaN or Inf input leaves the per-rank state as
// it was and still comes out non-finite (the exchange must see it); a finite input right after
// continues from the untouched state exactly as if the bad one had never come.
TEST(UpdateMath, LocalRulesKeepNonFiniteGradientsOutOfTheirState) {
  AdamScalars a;
  a.step_size = 1.0f / (1.0f - 0.9f);
  a.inv_sqrt_bc2 = 1.0f / std::sqrt(1.0f - 0.999f);
  SgdScalars sg;
  sg.momentum = 0.9f;
  sg.first = false;
  SgdScalars nesterov = sg;
  nesterov.nesterov = true;
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    float m = 0.25f, v = 0.5f;
    EXPECT_FALSE(std::isfinite(adam_local_direction(bad, 2.0f, 0.01f, a, m, v)));
    EXPECT_EQ(m, 0.25f);
    EXPECT_EQ(v, 0.5f);
    // The next finite gradient gives the bits of a state that never saw `bad`.
    float m_ref = 0.25f, v_ref = 0.5f;
    const float d = adam_local_direction(0.125f, 2.0f, 0.01f, a, m, v);
    EXPECT_EQ(d, adam_local_direction(0.125f, 2.0f, 0.01f, a, m_ref, v_ref));
    EXPECT_EQ(m, m_ref);
    EXPECT_EQ(v, v_ref);

    float mom = -0.75f;
    EXPECT_FALSE(std::isfinite(adam_local_momentum(bad, 2.0f, 0.0f, 0.9f, 0.1f, mom)));
    EXPECT_EQ(mom, -0.75f);

    for (const SgdScalars& s : {sg, nesterov}) {
      float buf = 1.5f;
      EXPECT_FALSE(std::isfinite(sgd_local_direction(bad, 2.0f, 0.01f, s, buf)));
      EXPECT_EQ(buf, 1.5f);
    }
  }
}

// The CUDA kernels' weight-decay table (device_step.h), built on the host: every element of
// every tensor reads its tensor's flag, and the table covers the layout exactly.
// The first moment keeps its bias correction through the freeze: a frozen step is the size
// the warm-up's rule gives at the same t (it was plain lr: 0.64x with b1 0.99, F = 100).
TEST(UpdateMath, FrozenStepsKeepTheFirstMomentsBiasCorrection) {
  OptimConfig config;
  config.name = "adamw";
  config.beta1 = 0.99;
  config.beta2 = 0.999;
  const std::int64_t freeze = 100;
  const AdamScalars warm = adam_scalars(config, 1e-3, freeze - 1, std::nullopt);
  const AdamScalars frozen = adam_scalars(config, 1e-3, freeze, freeze);
  EXPECT_FLOAT_EQ(warm.step_size, static_cast<float>(1e-3 / (1.0 - std::pow(0.99, freeze))));
  EXPECT_FLOAT_EQ(frozen.step_size, static_cast<float>(1e-3 / (1.0 - std::pow(0.99, freeze + 1))));
  EXPECT_NEAR(frozen.step_size / warm.step_size, 1.0, 0.01);  // no jump at the freeze
  // v's correction stays the freeze's.
  EXPECT_FLOAT_EQ(frozen.inv_sqrt_bc2,
                  static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999, freeze))));
}

TEST(DecayChunkTable, GivesEveryElementItsTensorsFlag) {
  const ParamStore s = make_store();
  const std::vector<std::uint8_t> table = decay_chunk_table(s);
  const std::int64_t chunk = ParamStore::kAlignFloats;
  ASSERT_EQ(static_cast<std::int64_t>(table.size()) * chunk, s.flat_numel());
  for (const ParamEntry& e : s.entries()) {
    for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
      ASSERT_EQ(table[static_cast<std::size_t>(i / chunk)], e.spec.weight_decay ? 1 : 0)
          << e.spec.name << "[" << i - e.offset << "]";
    }
  }
}

}  // namespace
}  // namespace sparq::optim
