// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with
// PyTorch's bias correction:
//   adam:  g = grad + wd * p             adamw: p *= 1 - lr * wd;  g = grad
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// communicate: momentum (1-bit Adam style), freeze_steps = F > 0: steps t <= F are plain Adam
// on the aggregated gradient (the trainer requires them to be dense, compress.dense_warmup_steps
// >= F, or sent by a compressor that sends every entry: fp16, bf16). At the freeze, v is floored
// (optimizer.h, frozen_variance_floor); from then on v and its bias correction stay frozen,
// before_communication() advances THIS rank's momentum m = b1 m + (1 - b1) g and writes it into the
// gradient buffer, the compressor sends it (with error feedback), and step() applies p -= lr *
// aggregate / (sqrt(v_hat) + eps).
//
// Note [Sparse momentum rule]
// 1-bit Adam adopts the aggregated (compressed) momentum as every rank's m. Its compressor is
// dense, so that is harmless; with a sparse one the aggregate carries bursts of about 1/density
// steps of momentum released by error feedback, and adopting it feeds each burst back into m,
// which sends it again: the step after the freeze blew up in the study of issue 15. Here m stays
// the rank's exact local momentum and the aggregate is only applied. Momentum is linear in the
// gradients, so the mean of the ranks' m is exactly the momentum of the mean gradient, and error
// feedback delivers all of it: the sum of applied momenta equals dense frozen-variance Adam's
// minus what is still in the residuals.
//
// Note [The trainer's step decides the freeze]
// Whether a step's gradient buffer carries momentum is decided by before_communication() from
// the TRAINER's step (communicates_momentum(step)), the clock of compress.dense_warmup_steps
// too, and step() applies what was decided there. The optimizer's own count (steps_taken) lags
// the trainer's by every skipped step, so deciding in step() by it applied ordinary Adam to
// the communicated momentum at the freeze step after a skip (m updated twice, v taking in the
// sparse momentum's squares: the burst the freeze exists to avoid). The variance floor is
// applied at the freeze step's before_communication, range by range, even when that step is
// later skipped: v is frozen from then on either way, and a resume at any later step finds it
// floored in the checkpoint.
//
// Note [Frozen variance's bias correction]
// v's bias correction 1 - b2^t counts the updates v has had, and v is updated only by a step
// that is applied: a skipped step (non-finite aggregate) updates nothing. So the frozen v is
// corrected for the number of Adam steps taken before the freeze (steps_taken at the freeze
// step, kept in the checkpoint as optimizer.variance_updates_at_freeze), not for freeze_steps:
// with k of the F warm-up steps skipped, 1 - b2^F over-counts, v_hat comes out too small and
// every frozen step too large (sqrt(1 + b2) = 1.41x with F = 2, k = 1). When all F were skipped
// v is zero and its floor too, and a frozen step would be lr m / eps: the trainer stops the
// run with an error naming optim.freeze_steps before that step (check_step).
// m's correction 1 - b1^t goes on after the freeze: the momenta are still every step's, built
// from zero at step 0, so dropping it (1-bit Adam corrects neither moment in either phase)
// shrank the first frozen step by 1 - b1^(F+1): 0.47x with b1 0.9 and F = 5, 0.64x with b1
// 0.99 and F = 100, recovering only as b1^t decayed (review, 2026-12-05). Its t counts m's
// updates: the Adam steps taken before the freeze, then one per TRAINER step, because a
// frozen step's momentum is advanced in before_communication() even when the step is then
// skipped (steps_taken, which skips it, made every later step 1 - b1^(t+1) / (1 - b1^t) too
// large per skip: 1.27x at t = 3; review, 2026-12-05).
//
// communicate: update: before_communication() runs Adam on this rank's gradient with this
// rank's moments and writes the direction m_hat / (sqrt(v_hat) + eps); step() applies
// p *= 1 - lr wd (adamw) and p -= lr * aggregate (update_math.h).
#pragma once

#include <optional>

#include "optim/optimizer.h"
#include "optim/update_math.h"

namespace sparq::optim {

// The scalars of the step after `steps_taken` steps with learning rate `lr`.
// `frozen_variance_updates`: set when that step applies communicated momentum with the frozen
// variance, to how many updates v had when it froze (Note [Frozen variance's bias
// correction]; must be > 0).
AdamScalars adam_scalars(const OptimConfig& config, double lr, std::int64_t steps_taken,
                         std::optional<std::int64_t> frozen_variance_updates);

class Adam final : public Optimizer {
 public:
  Adam(const OptimConfig& config, const ParamStore& store);
  std::string name() const override { return config_.name; }
  void before_communication(std::int64_t step, ParamRange range) override;
  void step(double lr) override;
  std::vector<StateTensor> state() override;
  // The variance is replicated in the momentum mode (estimated from the averaged dense steps,
  // then frozen) and per rank but non-linear in the update mode.
  StateAcrossRanks state_across_ranks(const std::string& state_name) const override;
  Status check_step(std::int64_t step) const override;
  std::vector<std::pair<std::string, std::int64_t>> counters() const override;
  void set_counter(const std::string& name, std::int64_t value) override;
  Status check_resume(std::int64_t step) const override;

  // True when the gradient buffer of step `step` carries momentum instead of a gradient.
  bool communicates_momentum(std::int64_t step) const {
    return config_.freeze_steps > 0 && step >= config_.freeze_steps;
  }

 private:
  // Raises every v of the tensors in `range` below frozen_variance_floor x its tensor's mean
  // (once, at the freeze).
  void floor_frozen_variance(ParamRange range);
  // The update count the frozen v is corrected for (Note [Frozen variance's bias correction]).
  std::int64_t frozen_variance_updates() const;

  OptimConfig config_;
  Buffer m_;
  Buffer v_;
  // Set by before_communication(): this step's buffer holds momentum (Note [The trainer's
  // step decides the freeze]).
  bool momentum_in_buffer_ = false;
  // With it, the trainer's step (m's bias correction counts the momentum updates to it).
  std::int64_t frozen_step_ = 0;
  // steps_taken at the freeze step; -1 before it (or from a checkpoint that predates it).
  std::int64_t variance_updates_at_freeze_ = -1;
  // The freeze_steps of the run a checkpoint was written by; -1 when not resumed (or from a
  // checkpoint that predates it).
  std::int64_t resumed_freeze_steps_ = -1;
};

}  // namespace sparq::optim
