// SGD with momentum, dampening, Nesterov and L2 weight decay, with PyTorch's semantics:
//   g = grad + wd * p                       (only tensors whose spec has weight_decay)
//   buf = g on the first step, else buf = momentum * buf + (1 - dampening) * g
//   d = nesterov ? g + momentum * buf : buf (d = g when momentum == 0)
//   p -= lr * d
//
// communicate: update: before_communication() computes d from this rank's gradient and its own
// momentum buffer (the error-compensated local momentum, as DGC's momentum correction does for
// its own compressor) and writes it into the gradient buffer; step() applies p -= lr * aggregate.
#pragma once

#include "optim/optimizer.h"
#include "optim/update_math.h"

namespace sparq::optim {

// The scalars of the step after `steps_taken` steps with learning rate `lr`.
SgdScalars sgd_scalars(const OptimConfig& config, double lr, std::int64_t steps_taken);

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimConfig& config, const ParamStore& store);
  std::string name() const override { return "sgd"; }
  void before_communication(std::int64_t step, ParamRange range) override;
  void step(double lr) override;
  std::vector<StateTensor> state() override;

 private:
  OptimConfig config_;
  Buffer momentum_;  // empty when momentum == 0
};

}  // namespace sparq::optim
