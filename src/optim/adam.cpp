#include "optim/adam.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/check.h"
#include "core/tensor_copy.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#include "optim/cuda/optimizer_cuda.h"
#include "optim/device_step.h"
#endif

namespace sparq::optim {

AdamScalars adam_scalars(const OptimConfig& config, double lr, std::int64_t steps_taken,
                         std::optional<std::int64_t> frozen_variance_updates) {
  const bool frozen = frozen_variance_updates.has_value();
  SPARQ_CHECK(!frozen || *frozen_variance_updates > 0,
              "a frozen variance with {} updates has no bias correction",
              frozen_variance_updates.value_or(0));
  const std::int64_t t = steps_taken + 1;
  // Bias corrections in double (as PyTorch computes them on the host); v's is frozen with it
  // (Note [Frozen variance's bias correction], adam.h).
  const std::int64_t t_v = frozen ? *frozen_variance_updates : t;
  AdamScalars s;
  s.lr = static_cast<float>(lr);
  s.beta1 = static_cast<float>(config.beta1);
  s.beta2 = static_cast<float>(config.beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - config.beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - config.beta2);
  s.eps = static_cast<float>(config.eps);
  // m keeps its bias correction after the freeze (Note [Frozen variance's bias correction]).
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(config.beta1, t)));
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, t_v)));
  s.decoupled = config.name == "adamw";
  return s;
}

Adam::Adam(const OptimConfig& config, const ParamStore& store)
    : Optimizer(store, config.communicate),
      config_(config),
      m_(flat_state_buffer()),
      v_(flat_state_buffer()) {}

void Adam::before_communication(std::int64_t step, ParamRange range) {
  const bool l2 = config_.name == "adam";
  float* grads = store_.grads();
  const float* params = store_.params();
  float* m = m_.as<float>();
  if (sends_update()) {
    // The scalars of this rank's next step at lr = 1: step_size is the bias correction. Its
    // count is the trainer's step, not steps_: the local moments advance on every step, a
    // skipped one too (Note [Local state and non-finite gradients], update_math.h), and
    // steps_ does not count skipped steps; from the step they started at (local_state_origin).
    const AdamScalars s = adam_scalars(config_, 1.0, step - local_state_origin_, std::nullopt);
    float* v = v_.as<float>();
    if (on_cuda()) {
#if SPARQ_HAS_CUDA
      const ParamRange span = tensors_span(range);
      cuda::adam_direction_into_grads(grads, params, m, v, device_->decay_table(), span.offset,
                                      span.end(),
                                      l2 ? static_cast<float>(config_.weight_decay) : 0.0f, s,
                                      store_.context().cuda().stream.get());
#endif
      return;
    }
    for_each_in(range, [&](const ParamEntry& e) {
      const float wd = (l2 && e.spec.weight_decay) ? static_cast<float>(config_.weight_decay) : 0.0f;
      float* g = grads + e.offset;
      const float* p = params + e.offset;
      float* mm = m + e.offset;
      float* vv = v + e.offset;
      const std::int64_t n = e.numel;
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) g[i] = adam_local_direction(g[i], p[i], wd, s, mm[i], vv[i]);
    });
    return;
  }
  // Note [The trainer's step decides the freeze]: what the buffer holds from here on is
  // decided once, now, by the trainer's step, and step() applies exactly that.
  momentum_in_buffer_ = communicates_momentum(step);
  if (!momentum_in_buffer_) return;
  frozen_step_ = step;
  if (step == config_.freeze_steps) {
    // Note [Frozen variance's bias correction]: every Adam step so far updated v once.
    variance_updates_at_freeze_ = steps_;
    floor_frozen_variance(range);
  }
  const float b1 = static_cast<float>(config_.beta1);
  const float one_minus_b1 = static_cast<float>(1.0 - config_.beta1);  // AdamScalars
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    const ParamRange span = tensors_span(range);
    cuda::adam_momentum_into_grads(grads, params, m, device_->decay_table(), span.offset,
                                   span.end(), l2 ? static_cast<float>(config_.weight_decay) : 0.0f,
                                   b1, one_minus_b1, store_.context().cuda().stream.get());
#endif
    return;
  }
  for_each_in(range, [&](const ParamEntry& e) {
    const float wd = (l2 && e.spec.weight_decay) ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* g = grads + e.offset;
    const float* p = params + e.offset;
    float* mm = m + e.offset;
    const std::int64_t n = e.numel;
    // `parallel for`, not `parallel for simd`: Note [Reduction lanes], core/ops.cpp.
#pragma omp parallel for schedule(static) if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i)
      g[i] = adam_local_momentum(g[i], p[i], wd, b1, one_minus_b1, mm[i]);
  });
}

void Adam::floor_frozen_variance(ParamRange range) {
  const double floor = config_.frozen_variance_floor;
  if (floor <= 0.0 || range.count <= 0) return;
  // v of `range` (on CUDA a host copy of that span only: this runs during backward, range by
  // range, at the freeze step). The copies are ordered on the compute stream, v's only user,
  // not copy_to_host's device-wide drain, which would wait for the step's collectives already
  // in flight, without comm.timeout_s (Note [Synchronous copies and non-blocking streams],
  // core/cuda/sync_copy.h; static review, 2026-12-06).
  std::vector<float> staging;
  float* v = v_.as<float>() + range.offset;
  [[maybe_unused]] const std::size_t bytes = static_cast<std::size_t>(range.count) * sizeof(float);
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    staging.resize(static_cast<std::size_t>(range.count));
    const cudaStream_t stream = store_.context().cuda().stream.get();
    CUDA_CHECK(cudaMemcpyAsync(staging.data(), v, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    v = staging.data();
#endif
  }
  // Per tensor, in double and in element order: the same bits on every rank (v is replicated).
  for_each_in(range, [&](const ParamEntry& e) {
    float* vv = v + (e.offset - range.offset);
    double sum = 0.0;
    for (std::int64_t i = 0; i < e.numel; ++i) sum += vv[i];
    const auto low = static_cast<float>(floor * sum / static_cast<double>(e.numel));
    for (std::int64_t i = 0; i < e.numel; ++i) vv[i] = std::max(vv[i], low);
  });
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    const cudaStream_t stream = store_.context().cuda().stream.get();
    CUDA_CHECK(cudaMemcpyAsync(v_.as<float>() + range.offset, staging.data(), bytes,
                               cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));  // staging is freed on return
#endif
  }
}

void Adam::step(double lr) {
  float* params = store_.params();
  const float* grads = store_.grads();
  if (sends_update()) {
    const bool decoupled = config_.name == "adamw";
    const auto lr_f = static_cast<float>(lr);
    if (on_cuda()) {
#if SPARQ_HAS_CUDA
      cuda::apply_update_step(params, grads, device_->decay_table(), store_.flat_numel(),
                              decoupled ? static_cast<float>(config_.weight_decay) : 0.0f, lr_f,
                              device_->take_grad_scale(), device_->take_guard(),
                              store_.context().cuda().stream.get());
#endif
      ++steps_;
      return;
    }
    for (const ParamEntry& e : store_.entries()) {
      const float wd = (decoupled && e.spec.weight_decay) ? static_cast<float>(config_.weight_decay) : 0.0f;
      float* p = params + e.offset;
      const float* u = grads + e.offset;
      const std::int64_t n = e.numel;
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) apply_averaged_update(u[i], wd, lr_f, p[i]);
    }
    ++steps_;
    return;
  }
  // Note [The trainer's step decides the freeze] (adam.h). After the freeze m advances in
  // before_communication() on every trainer step, a skipped one too (Note [Local state and
  // non-finite gradients], update_math.h), so its bias correction counts those updates, not
  // steps_ (which skips them): the Adam steps before the freeze, then one per trainer step.
  const bool frozen = momentum_in_buffer_;
  const std::int64_t m_updates_before =
      frozen ? frozen_variance_updates() + (frozen_step_ - config_.freeze_steps) : steps_;
  const AdamScalars s =
      adam_scalars(config_, lr, m_updates_before,
                   frozen ? std::optional(frozen_variance_updates()) : std::nullopt);
  float* m = m_.as<float>();
  float* v = v_.as<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::adam_step(params, grads, m, v, device_->decay_table(), store_.flat_numel(), s, frozen,
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
    float* mm = m + e.offset;
    float* vv = v + e.offset;
    const std::int64_t n = e.numel;
    if (frozen) {
      // The buffer holds the aggregated momentum (Note [Sparse momentum rule]).
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) adam_frozen_update(g[i], wd, s, p[i], vv[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n > 32768)
      for (std::int64_t i = 0; i < n; ++i) adam_update(g[i], wd, s, p[i], mm[i], vv[i]);
    }
  }
  ++steps_;
}

std::int64_t Adam::frozen_variance_updates() const {
  // -1: resumed from a checkpoint written before the count was kept, by a run that had frozen
  // already; that code corrected for freeze_steps updates, so this continues it unchanged.
  return variance_updates_at_freeze_ >= 0 ? variance_updates_at_freeze_ : config_.freeze_steps;
}

Status Adam::check_step(std::int64_t step) const {
  if (communicates_momentum(step) && step == config_.freeze_steps && steps_ == 0) {
    return Status::error(
        "step {}: optim.freeze_steps: the variance freezes now, but every one of the {} steps "
        "before it was skipped (non-finite gradients), so it was never estimated and the frozen "
        "steps would divide by optim.eps: lower optim.lr, set optim.clip_norm, or raise "
        "optim.freeze_steps",
        step, config_.freeze_steps);
  }
  return Status::ok();
}

std::vector<std::pair<std::string, std::int64_t>> Adam::counters() const {
  if (config_.communicate != "momentum") return {};
  return {{"variance_updates_at_freeze", variance_updates_at_freeze_},
          {"freeze_steps", config_.freeze_steps}};
}

void Adam::set_counter(const std::string& name, std::int64_t value) {
  if (name == "variance_updates_at_freeze") variance_updates_at_freeze_ = value;
  if (name == "freeze_steps") resumed_freeze_steps_ = value;
}

// Another freeze_steps on resume is fine while neither run has frozen by `step`; across a
// freeze the state means something else: v frozen (and floored) at the old step, m's bias
// count measured from it (Note [Frozen variance's bias correction]), or a v never floored and
// a count never taken for a freeze the new setting puts in the past (review, 2026-12-05).
Status Adam::check_resume(std::int64_t step) const {
  const std::int64_t saved = resumed_freeze_steps_;
  if (saved < 0 || saved == config_.freeze_steps) return Status::ok();
  const auto frozen_before = [step](std::int64_t freeze) { return freeze > 0 && step > freeze; };
  if (!frozen_before(saved) && !frozen_before(config_.freeze_steps)) return Status::ok();
  return Status::error(
      "optim.freeze_steps is {} here but {} in the checkpoint of step {}: the variance {} "
      "before it; resume with optim.freeze_steps: {}",
      config_.freeze_steps, saved, step,
      frozen_before(saved) ? fmt::format("froze at step {}", saved)
                           : fmt::format("would have frozen at step {}", config_.freeze_steps),
      saved);
}

std::vector<StateTensor> Adam::state() {
  return {flat_state(config_.name + ".exp_avg", m_),
          flat_state(config_.name + ".exp_avg_sq", v_)};
}

Optimizer::StateAcrossRanks Adam::state_across_ranks(const std::string& state_name) const {
  StateAcrossRanks across = Optimizer::state_across_ranks(state_name);
  if (state_name != config_.name + ".exp_avg_sq") return across;
  if (communicate_ == "momentum") {
    across.replicated = true;
    across.label = "Adam's variance";
  }
  across.mean_is_exact = across.replicated;
  return across;
}

}  // namespace sparq::optim
