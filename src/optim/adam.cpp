#include "optim/adam.h"

#include <algorithm>
#include <cmath>

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#include "optim/cuda/optimizer_cuda.h"
#include "optim/device_step.h"
#endif

namespace sparq::optim {

AdamScalars adam_scalars(const OptimConfig& config, double lr, std::int64_t steps_taken,
                         bool frozen) {
  const std::int64_t t = steps_taken + 1;
  // Bias corrections in double (as PyTorch computes them on the host); frozen at step F.
  const std::int64_t t_v = frozen ? config.freeze_steps : t;
  AdamScalars s;
  s.lr = static_cast<float>(lr);
  s.beta1 = static_cast<float>(config.beta1);
  s.beta2 = static_cast<float>(config.beta2);
  s.eps = static_cast<float>(config.eps);
  s.step_size = frozen ? s.lr : static_cast<float>(lr / (1.0 - std::pow(config.beta1, t)));
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, t_v)));
  s.decoupled = config.name == "adamw";
  return s;
}

Adam::Adam(const OptimConfig& config, const ParamStore& store)
    : Optimizer(store), config_(config), m_(flat_state_buffer()), v_(flat_state_buffer()) {}

void Adam::before_communication(std::int64_t step, ParamRange range) {
  if (!communicates_momentum(step)) return;
  const float b1 = static_cast<float>(config_.beta1);
  const bool l2 = config_.name == "adam";
  float* grads = store_.grads();
  const float* params = store_.params();
  const float* m = m_.as<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    // The tensors wholly inside `range` span [lo, hi) with nothing but their zero padding
    // between them (tensors do not overlap), so one launch over the span updates exactly them.
    std::int64_t lo = range.end(), hi = range.offset;
    for_each_in(range, [&](const ParamEntry& e) {
      lo = std::min(lo, e.offset);
      hi = std::max(hi, e.offset + e.numel);
    });
    cuda::adam_momentum_into_grads(grads, params, m, device_->decay_table(), lo, hi,
                                   l2 ? static_cast<float>(config_.weight_decay) : 0.0f, b1,
                                   store_.context().cuda().stream.get());
#endif
    return;
  }
  for_each_in(range, [&](const ParamEntry& e) {
    const float wd = (l2 && e.spec.weight_decay) ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* g = grads + e.offset;
    const float* p = params + e.offset;
    const float* mm = m + e.offset;
    const std::int64_t n = e.numel;
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) g[i] = adam_momentum_to_send(g[i], p[i], mm[i], wd, b1);
  });
}

void Adam::step(double lr) {
  const bool frozen = communicates_momentum(steps_);
  const AdamScalars s = adam_scalars(config_, lr, steps_, frozen);
  float* params = store_.params();
  const float* grads = store_.grads();
  float* m = m_.as<float>();
  float* v = v_.as<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::adam_step(params, grads, m, v, device_->decay_table(), store_.flat_numel(), s, frozen,
                    static_cast<float>(config_.weight_decay), device_->take_grad_scale(),
                    store_.context().cuda().stream.get());
#endif
    ++steps_;
    return;
  }
  for (const ParamEntry& e : store_.entries()) {
    const float wd = e.spec.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* p = params + e.offset;
    const float* g = grads + e.offset;
    float* mm = m + e.offset;
    float* vv = v + e.offset;
    const std::int64_t n = e.numel;
    if (frozen) {
      // The buffer holds the aggregated momentum (see adam_frozen_update).
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) adam_frozen_update(g[i], wd, s, p[i], mm[i], vv[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) adam_update(g[i], wd, s, p[i], mm[i], vv[i]);
    }
  }
  ++steps_;
}

std::vector<StateTensor> Adam::state() {
  return {flat_state(config_.name + ".exp_avg", m_),
          flat_state(config_.name + ".exp_avg_sq", v_)};
}

}  // namespace sparq::optim
