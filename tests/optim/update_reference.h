// The optimizers' update rule written out as plain per-element loops, for
// update_math_test.cpp: the expressions of the CPU loops before they were moved into
// optim/update_math.h, in the same order and the same float/double mix, so that both the
// optimizers and the shared functions must reproduce its bits. Independent of update_math.h
// on purpose: it is the fixed point the shared math is checked against. Its multiply-adds are
// written out with mul_add (Note [Written-out multiply-adds], core/host_device.h) in the forms
// the compiler fused before: left to the compiler, an unoptimised (-O1 sanitizer) build fused
// nothing here while update_math.h's explicit fmas fused.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/host_device.h"
#include "core/param_store.h"
#include "optim/optimizer.h"

namespace sparq::optim {

// The rule of sgd.h and adam.h over one store's flat buffers, element by element, in the three
// optim.communicate modes (for `update` it writes the direction into the gradient buffer and
// applies the buffer; a one-rank "aggregate" is the buffer itself).
struct Reference {
  Reference(const OptimConfig& c, const ParamStore& s)
      : config(c), store(s), m(s.flat_numel(), 0.0f), v(s.flat_numel(), 0.0f) {}

  float decay(const ParamEntry& e) const {
    return e.spec.weight_decay ? static_cast<float>(config.weight_decay) : 0.0f;
  }
  bool frozen(std::int64_t step) const {
    return config.communicate == "momentum" && step >= config.freeze_steps;
  }
  bool update_mode() const { return config.communicate == "update"; }

  void before_communication(std::int64_t step) {
    if (update_mode()) {
      config.name == "sgd" ? sgd_direction() : adam_direction();
      return;
    }
    if (config.name == "sgd" || !frozen(step)) return;
    const float b1 = static_cast<float>(config.beta1);
    const float one_minus_b1 = static_cast<float>(1.0 - config.beta1);  // PyTorch's alpha
    for (const ParamEntry& e : store.entries()) {
      const float wd = config.name == "adam" ? decay(e) : 0.0f;
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
        float& g = store.grads()[i];
        m[i] = mul_add(b1, m[i], one_minus_b1 * mul_add(wd, store.params()[i], g));
        g = m[i];
      }
    }
  }

  void sgd_direction() {
    const float mu = static_cast<float>(config.momentum);
    const float damp = static_cast<float>(1.0 - config.dampening);
    for (const ParamEntry& e : store.entries()) {
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
        float& g = store.grads()[i];
        float d = mul_add(decay(e), store.params()[i], g);
        if (config.momentum > 0.0) {
          m[i] = steps == 0 ? d : mul_add(mu, m[i], damp * d);
          d = config.nesterov ? mul_add(mu, m[i], d) : m[i];
        }
        g = d;
      }
    }
  }

  void adam_direction() {
    const std::int64_t t = steps + 1;
    const float b1 = static_cast<float>(config.beta1), b2 = static_cast<float>(config.beta2);
    // 1 - beta from the double betas, as PyTorch passes it (alpha = 1 - beta).
    const float one_minus_b1 = static_cast<float>(1.0 - config.beta1),
                one_minus_b2 = static_cast<float>(1.0 - config.beta2);
    const float eps = static_cast<float>(config.eps);
    const float bc1 = static_cast<float>(1.0 / (1.0 - std::pow(config.beta1, t)));
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, t)));
    for (const ParamEntry& e : store.entries()) {
      const float wd = config.name == "adam" ? decay(e) : 0.0f;
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
        float& g = store.grads()[i];
        const float gi = mul_add(wd, store.params()[i], g);
        m[i] = mul_add(b1, m[i], one_minus_b1 * gi);
        v[i] = mul_add(b2, v[i], one_minus_b2 * gi * gi);
        g = bc1 * m[i] / mul_add(std::sqrt(v[i]), inv_sqrt_bc2, eps);
      }
    }
  }

  void step(double lr_d) {
    if (update_mode()) {
      const float lr = static_cast<float>(lr_d);
      for (const ParamEntry& e : store.entries()) {
        const float wd = config.name == "adamw" ? decay(e) : 0.0f;
        for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
          float& p = store.params()[i];
          p = mul_add(-lr, mul_add(wd, p, store.grads()[i]), p);
        }
      }
    } else if (config.name == "sgd") {
      sgd_step(lr_d);
    } else {
      adam_step(lr_d);
    }
    ++steps;
  }

  void sgd_step(double lr_d) {
    const float lr = static_cast<float>(lr_d), mu = static_cast<float>(config.momentum);
    const float damp = static_cast<float>(1.0 - config.dampening);
    for (const ParamEntry& e : store.entries()) {
      const float wd = decay(e);
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
        float& p = store.params()[i];
        float d = mul_add(wd, p, store.grads()[i]);
        if (config.momentum > 0.0) {
          m[i] = steps == 0 ? d : mul_add(mu, m[i], damp * d);
          d = config.nesterov ? mul_add(mu, m[i], d) : m[i];
        }
        p = mul_add(-lr, d, p);
      }
    }
  }

  // optimizer.h's frozen_variance_floor, at the first frozen step.
  void floor_variance() {
    for (const ParamEntry& e : store.entries()) {
      double sum = 0.0;
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) sum += v[i];
      const auto low =
          static_cast<float>(config.frozen_variance_floor * sum / static_cast<double>(e.numel));
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) v[i] = std::max(v[i], low);
    }
  }

  void adam_step(double lr_d) {
    const std::int64_t t = steps + 1;
    const bool is_frozen = frozen(steps);
    if (is_frozen && steps == config.freeze_steps) floor_variance();
    const float lr = static_cast<float>(lr_d);
    const float b1 = static_cast<float>(config.beta1), b2 = static_cast<float>(config.beta2);
    // 1 - beta from the double betas, as PyTorch passes it (alpha = 1 - beta).
    const float one_minus_b1 = static_cast<float>(1.0 - config.beta1),
                one_minus_b2 = static_cast<float>(1.0 - config.beta2);
    const float eps = static_cast<float>(config.eps);
    const std::int64_t t_v = is_frozen ? config.freeze_steps : t;
    // m's bias correction continues through the freeze (adam.h).
    const float step_size = static_cast<float>(lr_d / (1.0 - std::pow(config.beta1, t)));
    const float inv_sqrt_bc2 =
        static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, t_v)));
    const bool decoupled = config.name == "adamw";
    for (const ParamEntry& e : store.entries()) {
      const float wd = decay(e);
      for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
        float& p = store.params()[i];
        float gi = store.grads()[i];
        if (decoupled) {
          p *= mul_add(-lr, wd, 1.0f);
        } else if (!is_frozen) {
          gi = mul_add(wd, p, gi);
        }
        if (is_frozen) {
          // The buffer holds the aggregated momentum; this rank's m is not replaced by it.
          p -= step_size * gi / mul_add(std::sqrt(v[i]), inv_sqrt_bc2, eps);
          continue;
        }
        m[i] = mul_add(b1, m[i], one_minus_b1 * gi);
        v[i] = mul_add(b2, v[i], one_minus_b2 * gi * gi);
        p -= step_size * m[i] / mul_add(std::sqrt(v[i]), inv_sqrt_bc2, eps);
      }
    }
  }

  OptimConfig config;
  const ParamStore& store;
  std::vector<float> m, v;  // sgd: m is the momentum buffer
  std::int64_t steps = 0;
};

}  // namespace sparq::optim
