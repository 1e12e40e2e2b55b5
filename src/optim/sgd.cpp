#include "optim/sgd.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#include "optim/cuda/optimizer_cuda.h"
#include "optim/device_step.h"
#endif

namespace sparq::optim {

SgdScalars sgd_scalars(const OptimConfig& config, double lr, std::int64_t steps_taken) {
  SgdScalars s;
  s.lr = static_cast<float>(lr);
  s.momentum = static_cast<float>(config.momentum);
  s.damp = static_cast<float>(1.0 - config.dampening);  // as AdamScalars::one_minus_beta1
  s.first = steps_taken == 0;
  s.nesterov = config.nesterov;
  return s;
}

Sgd::Sgd(const OptimConfig& config, const ParamStore& store)
    : Optimizer(store, config.communicate), config_(config) {
  if (config_.momentum > 0.0) momentum_ = flat_state_buffer();
}

void Sgd::before_communication(std::int64_t step, ParamRange range) {
  if (!sends_update()) return;
  // Counted by the trainer's step, not steps_: the local buffer advances on a skipped step
  // too (Note [Local state and non-finite gradients], update_math.h), so only the step it
  // started at (local_state_origin) starts it.
  const SgdScalars s = sgd_scalars(config_, 1.0, step - local_state_origin_);
  float* grads = store_.grads();
  const float* params = store_.params();
  float* buf = momentum_.as<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    const ParamRange span = tensors_span(range);
    cuda::sgd_direction_into_grads(grads, params, buf, device_->decay_table(), span.offset,
                                   span.end(), static_cast<float>(config_.weight_decay), s,
                                   store_.context().cuda().stream.get());
#endif
    return;
  }
  for_each_in(range, [&](const ParamEntry& e) {
    const float wd = e.spec.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* g = grads + e.offset;
    const float* p = params + e.offset;
    float* b = buf ? buf + e.offset : nullptr;
    const std::int64_t n = e.numel;
    if (b) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) g[i] = sgd_local_direction(g[i], p[i], wd, s, b[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        float unused = 0.0f;  // no momentum buffer: sgd_local_direction does not touch it
        g[i] = sgd_local_direction(g[i], p[i], wd, s, unused);
      }
    }
  });
}

void Sgd::step(double lr) {
  const SgdScalars s = sgd_scalars(config_, lr, steps_);
  float* params = store_.params();
  const float* grads = store_.grads();
  float* buf = momentum_.as<float>();
  if (sends_update()) {
    const auto lr_f = static_cast<float>(lr);
    if (on_cuda()) {
#if SPARQ_HAS_CUDA
      // L2 decay is inside the direction (sgd_local_direction): none here.
      cuda::apply_update_step(params, grads, device_->decay_table(), store_.flat_numel(), 0.0f,
                              lr_f, device_->take_grad_scale(), device_->take_guard(),
                              store_.context().cuda().stream.get());
#endif
      ++steps_;
      return;
    }
    for (const ParamEntry& e : store_.entries()) {
      float* p = params + e.offset;
      const float* u = grads + e.offset;
      const std::int64_t n = e.numel;
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) apply_averaged_update(u[i], 0.0f, lr_f, p[i]);
    }
    ++steps_;
    return;
  }
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::sgd_step(params, grads, buf, device_->decay_table(), store_.flat_numel(), s,
                   static_cast<float>(config_.weight_decay), device_->take_grad_scale(),
                   device_->take_guard(), store_.context().cuda().stream.get());
#endif
    ++steps_;
    return;
  }
  for (const ParamEntry& e : store_.entries()) {
    const float wd = e.spec.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* p = params + e.offset;
    const float* g = grads + e.offset;
    const std::int64_t n = e.numel;
    if (buf) {
      float* b = buf + e.offset;
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) sgd_momentum_update(g[i], wd, s, p[i], b[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) sgd_plain_update(g[i], wd, s, p[i]);
    }
  }
  ++steps_;
}

std::vector<StateTensor> Sgd::state() {
  if (!momentum_.data()) return {};
  return {flat_state("sgd.momentum", momentum_)};
}

}  // namespace sparq::optim
