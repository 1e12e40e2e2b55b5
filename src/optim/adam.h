// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with
// PyTorch's bias correction:
//   adam:  g = grad + wd * p             adamw: p *= 1 - lr * wd;  g = grad
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// With freeze_steps = F > 0 (1-bit Adam style error-compensated mode): steps t <= F are plain
// Adam with dense communication. From step F on, v and its bias correction stay frozen;
// before_communication() replaces the local gradient with the local momentum
// b1 m + (1 - b1) g, which the compressor (with error feedback) sends; step() then adopts
// the aggregated buffer as the shared momentum m and applies p -= lr * m / (sqrt(v_hat) + eps).
#pragma once

#include "optim/optimizer.h"
#include "optim/update_math.h"

namespace sparq::optim {

// The scalars of the step after `steps_taken` steps with learning rate `lr`; `frozen` when
// that step adopts the communicated momentum (Adam::communicates_momentum(steps_taken)).
AdamScalars adam_scalars(const OptimConfig& config, double lr, std::int64_t steps_taken,
                         bool frozen);

class Adam final : public Optimizer {
 public:
  Adam(const OptimConfig& config, const ParamStore& store);
  std::string name() const override { return config_.name; }
  void before_communication(std::int64_t step, ParamRange range) override;
  void step(double lr) override;
  std::vector<StateTensor> state() override;

  // True when the gradient buffer of step `step` carries momentum instead of a gradient.
  bool communicates_momentum(std::int64_t step) const {
    return config_.freeze_steps > 0 && step >= config_.freeze_steps;
  }

 private:
  OptimConfig config_;
  Buffer m_;
  Buffer v_;
};

}  // namespace sparq::optim
