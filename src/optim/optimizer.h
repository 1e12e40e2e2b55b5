// Optimizers as flat kernels over the ParamStore: one pass over each parameter tensor's range
// of the parameter buffer, the (aggregated) gradient buffer and the state buffers, which all
// share the store's layout. Weight decay follows each spec's weight_decay flag.
//
// Order within a training step (see DESIGN.md, "One iteration"):
//   backward -> before_communication(step) -> gradients communicated and averaged in place
//   -> clip_grad_norm -> step(lr) -> zero_grads
//
// before_communication() lets an error-compensated variant replace the local gradient with
// what should travel instead: Adam with `freeze_steps` (1-bit Adam style) writes its local
// momentum there once the variance is frozen, and then treats the aggregated buffer as the
// shared momentum. It is called per tensor range, right before that range is reported ready
// to the WFBP scheduler, so it composes with overlapping communication.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/param_store.h"
#include "core/status.h"

namespace sparq::optim {

struct OptimConfig {
  std::string name = "adamw";  // sgd | adam | adamw
  double weight_decay = 0.0;
  // sgd
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  // adam / adamw
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // adam / adamw: after this many steps the second moment is frozen and the momentum is what
  // gets communicated (0 = never freeze).
  std::int64_t freeze_steps = 0;

  Status validate(const std::string& prefix = "optim.") const;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;

  // Hook before `range` (one or more whole tensors) of step `step` (0-based) is
  // communicated. Default: nothing.
  virtual void before_communication(std::int64_t step, ParamRange range) {}
  // Applies one update from the gradient buffer with learning rate `lr`.
  virtual void step(double lr) = 0;

  std::int64_t steps_taken() const { return steps_; }
  // Everything needed to resume bit-identically (the step counter travels separately): f32
  // views of the state buffers, each with the store's flat layout.
  virtual std::vector<StateTensor> state() = 0;
  void set_steps_taken(std::int64_t steps) { steps_ = steps; }

 protected:
  explicit Optimizer(const ParamStore& store) : store_(store) {}
  // One zeroed f32 buffer with the store's flat layout (momentum, moments, ...).
  Buffer flat_state_buffer() const;
  // A checkpoint view of such a buffer.
  StateTensor flat_state(std::string name, const Buffer& buffer) const;
  // Calls fn(entry) for every parameter tensor lying inside `range`.
  template <typename Fn>
  void for_each_in(ParamRange range, Fn&& fn) const {
    for (const ParamEntry& e : store_.entries()) {
      if (e.offset >= range.offset && e.offset + e.numel <= range.end()) fn(e);
    }
  }

  const ParamStore& store_;
  std::int64_t steps_ = 0;
};

// Builds the optimizer named in the config over an allocated CPU store.
Result<std::unique_ptr<Optimizer>> make_optimizer(const OptimConfig& config,
                                                  const ParamStore& store);

}  // namespace sparq::optim
