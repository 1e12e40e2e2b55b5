#include "optim/adam.h"

#include <cmath>

namespace sparq::optim {

Adam::Adam(const OptimConfig& config, const ParamStore& store)
    : Optimizer(store), config_(config), m_(flat_state_buffer()), v_(flat_state_buffer()) {}

void Adam::before_communication(std::int64_t step, ParamRange range) {
  if (!communicates_momentum(step)) return;
  const float b1 = static_cast<float>(config_.beta1);
  const bool l2 = config_.name == "adam";
  float* grads = store_.grads();
  const float* params = store_.params();
  const float* m = m_.as<float>();
  for_each_in(range, [&](const ParamEntry& e) {
    const float wd = (l2 && e.spec.weight_decay) ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* g = grads + e.offset;
    const float* p = params + e.offset;
    const float* mm = m + e.offset;
    const std::int64_t n = e.numel;
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) g[i] = b1 * mm[i] + (1.0f - b1) * (g[i] + wd * p[i]);
  });
}

void Adam::step(double lr_d) {
  const std::int64_t t = steps_ + 1;
  const bool frozen = communicates_momentum(steps_);
  const float lr = static_cast<float>(lr_d);
  const float b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
  const float eps = static_cast<float>(config_.eps);
  // Bias corrections in double (as PyTorch computes them on the host); frozen at step F.
  const std::int64_t t_v = frozen ? config_.freeze_steps : t;
  const float step_size = frozen ? lr : static_cast<float>(lr_d / (1.0 - std::pow(config_.beta1, t)));
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config_.beta2, t_v)));
  const bool decoupled = config_.name == "adamw";
  float* params = store_.params();
  const float* grads = store_.grads();
  float* m = m_.as<float>();
  float* v = v_.as<float>();
  for (const ParamEntry& e : store_.entries()) {
    const float wd = e.spec.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* p = params + e.offset;
    const float* g = grads + e.offset;
    float* mm = m + e.offset;
    float* vv = v + e.offset;
    const std::int64_t n = e.numel;
    if (frozen) {
      // The buffer holds the aggregated momentum (weight decay of adam already folded in by
      // before_communication; adamw decays the weights here).
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) {
        if (decoupled) p[i] *= 1.0f - lr * wd;
        mm[i] = g[i];
        p[i] -= step_size * mm[i] / (std::sqrt(vv[i]) * inv_sqrt_bc2 + eps);
      }
      continue;
    }
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) {
      float gi = g[i];
      if (decoupled) {
        p[i] *= 1.0f - lr * wd;
      } else {
        gi += wd * p[i];
      }
      mm[i] = b1 * mm[i] + (1.0f - b1) * gi;
      vv[i] = b2 * vv[i] + (1.0f - b2) * gi * gi;
      p[i] -= step_size * mm[i] / (std::sqrt(vv[i]) * inv_sqrt_bc2 + eps);
    }
  }
  ++steps_;
}

std::vector<StateTensor> Adam::state() {
  return {flat_state(config_.name + ".exp_avg", m_),
          flat_state(config_.name + ".exp_avg_sq", v_)};
}

}  // namespace sparq::optim
