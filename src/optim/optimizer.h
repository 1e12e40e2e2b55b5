// Optimizers as flat kernels over the ParamStore: one pass over each parameter tensor's range
// of the parameter buffer, the (aggregated) gradient buffer and the state buffers, which all
// share the store's layout. Weight decay follows each spec's weight_decay flag.
//
// Order within a training step (see DESIGN.md, "One iteration"):
//   backward -> before_communication(step) -> gradients communicated and averaged in place
//   -> clip_grad_norm(max_norm) -> step(lr) -> zero_grads
//
// Device: the optimizer runs where the store lives. On a CUDA store the state buffers are
// device memory, step() is ONE fused kernel over the whole flat layout (optim/cuda/
// optimizer_cuda.h) running update_math.h's per-element rule, queued on the context's compute
// stream, and clip_grad_norm() leaves its scale on the device for that kernel. The learning
// rate and every other per-step scalar are computed on the host and passed by value.
//
// What travels (`communicate`, docs/convergence.md compares them):
//   gradient  the gradient; the optimizer runs on the aggregate (error feedback, if any, acts
//             on the gradient). All state is replicated.
//   momentum  Adam only, 1-bit Adam style: dense Adam for `freeze_steps` steps, then the
//             variance is frozen and each rank's own momentum travels (adam.h).
//   update    each rank runs the optimizer on its OWN gradient with its own state and the
//             resulting direction travels (with error feedback when compressed: the
//             error-compensated update of the CocktailSGD/DeMo family); the averaged direction
//             is applied to the replicated parameters. Optimizer state is per rank (it is
//             checkpointed per rank, like the residual). A step the trainer skips (non-finite
//             aggregate) has already advanced the ranks' moments in before_communication().
// before_communication() is where a mode replaces the local gradient with what should travel.
// It is called per tensor range, right before that range is reported ready to the WFBP
// scheduler, so it composes with overlapping communication. The modes that do not send a
// gradient clip the LOCAL gradient (optim.clip_scope, data_parallel.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/param_store.h"
#include "core/status.h"

namespace sparq::optim {

// The largest beta1/beta2 accepted (Note [Betas and eps in f32], optimizer.cpp).
inline constexpr double kMaxBeta = 0.999999;

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
  // gradient | momentum | update (see above).
  std::string communicate = "gradient";
  // communicate: momentum: after this many steps the second moment is frozen (> 0 there, 0
  // otherwise), and at the freeze every element's v is raised to at least
  // frozen_variance_floor x the mean v of its tensor, so that coordinates whose variance was
  // never estimated (embedding rows of tokens not yet seen) cannot divide by ~0.
  std::int64_t freeze_steps = 0;
  double frozen_variance_floor = 0.1;

  Status validate(const std::string& prefix = "optim.") const;
  // One line per setting changed from its default that this optimizer and mode never read
  // (momentum with adamw, beta1 with sgd, frozen_variance_floor without a freeze): the
  // trainer logs them as warnings and the dry run prints them.
  std::vector<std::string> unread_settings(const std::string& prefix = "optim.") const;
};

class DeviceStep;

class Optimizer {
 public:
  virtual ~Optimizer();
  virtual std::string name() const = 0;

  // Hook before `range` (one or more whole tensors) of step `step` (0-based) is
  // communicated. Default: nothing.
  virtual void before_communication(std::int64_t /*step*/, ParamRange /*range*/) {}
  // True when the gradient buffer holds an update direction, not a gradient, after
  // before_communication() of step `step`.
  bool sends_update() const { return communicate_ == "update"; }
  // Global-norm clipping of the aggregated gradient (optim/clip.h's rule) for the next step();
  // returns the norm before clipping; max_norm <= 0 only measures.
  //   CPU:  clip_grad_norm(store, max_norm): the gradient buffer is scaled in place.
  //   CUDA: norm and scale are computed on the device (DeviceStep::clip_grad_norm); one 8-byte
  //         copy brings the norm to the host. The gradient buffer is NOT scaled: the next
  //         step() multiplies each gradient by the device-side scale as it reads it, with the
  //         same f32 rounding as the CPU's in-place scaling. A step() with no clip before it
  //         uses the gradient as it is; a clip whose step is skipped is discarded by the next
  //         clip.
  double clip_grad_norm(double max_norm);
  // The guarded form, CUDA only, for a step whose kernels are enqueued without the host
  // waiting for the exchange (data_parallel.cpp): clip_grad_norm_on_device leaves the norm and
  // the scale on the device without reading the norm back; the next step() does nothing when
  // that norm is not finite (the device checks it); finish_guarded_step() then reads the norm
  // (blocking, behind the step) and returns it, uncounting a step the device skipped.
  void clip_grad_norm_on_device(double max_norm);
  // Local clipping (optim.clip_scope: local, data_parallel.h): THIS rank's gradient buffer is
  // scaled in place by optim/clip.h's rule, before before_communication() reads it; returns
  // the norm before clipping. CPU: clip.h's clip_grad_norm. CUDA: DeviceStep::clip_in_place
  // (the norm on the device, one 8-byte read-back, the buffer scaled on the compute stream).
  // Nothing is left for step(): the aggregate is measured by clip_grad_norm(0) as usual.
  double clip_local_gradient(double max_norm);
  double finish_guarded_step();
  bool on_device() const { return device_ != nullptr; }
  // Applies one update from the gradient buffer with learning rate `lr`.
  virtual void step(double lr) = 0;

  std::int64_t steps_taken() const { return steps_; }
  // Whether step `step` (the trainer's, 0-based) can run from this state; an error names the
  // setting that led here (Adam: a frozen variance that was never estimated). Default: ok.
  virtual Status check_step(std::int64_t /*step*/) const { return Status::ok(); }
  // Integer state beyond steps_taken() that a resume needs, by name: the checkpoint keeps each
  // as metadata "optimizer.<name>" (checkpointing.cpp), and a checkpoint without one (written
  // before it existed) leaves the optimizer's default. Default: none.
  virtual std::vector<std::pair<std::string, std::int64_t>> counters() const { return {}; }
  virtual void set_counter(const std::string& /*name*/, std::int64_t /*value*/) {}
  // Whether this config can go on from the restored state at the trainer's step `step` (set
  // by a resume after the counters): an error names the setting that changed what the state
  // means (Adam: optim.freeze_steps across its freeze). Default: ok.
  virtual Status check_resume(std::int64_t /*step*/) const { return Status::ok(); }
  // Everything needed to resume bit-identically (the step counter travels separately): f32
  // views of the state buffers, each with the store's flat layout, on the store's device
  // (device views on CUDA: the caller stages them).
  virtual std::vector<StateTensor> state() = 0;
  // How one of state()'s buffers relates across ranks, for a resume on another world size
  // (train/elastic_resume.h): a replicated buffer holds the same bytes on every rank (checked
  // and kept); a per-rank one is merged by the mean, which is exact for state linear in the
  // gradients (momenta) and only an estimate otherwise (a per-rank second moment).
  struct StateAcrossRanks {
    bool replicated = true;
    bool mean_is_exact = true;
    std::string label = "optimizer state";  // names it in the resume log
  };
  // Default: all state replicated where the ranks step on the aggregate (communicate:
  // gradient), else per rank and linear.
  virtual StateAcrossRanks state_across_ranks(const std::string& state_name) const;
  void set_steps_taken(std::int64_t steps) { steps_ = steps; }
  // communicate: update: the trainer's step at which this rank's local moments started: 0 in
  // a fresh run, the resumed step where a resume found none of the optimizer's state (optim.
  // momentum 0 -> 0.9). SGD's first local momentum is the gradient and Adam's bias corrections
  // count from it, as in a fresh run (they counted from step 0: with dampening 0.5 the first
  // momentum was half a fresh run's; review, 2026-12-07). A checkpoint keeps it
  // ("optimizer.local_state_origin").
  std::int64_t local_state_origin() const { return local_state_origin_; }
  void set_local_state_origin(std::int64_t step) { local_state_origin_ = step; }

 protected:
  Optimizer(const ParamStore& store, std::string communicate);
  bool on_cuda() const { return store_.device() == Device::kCUDA; }
  // One zeroed f32 buffer with the store's flat layout (momentum, moments, ...) on the store's
  // device: host memory on the CPU, device memory on CUDA.
  Buffer flat_state_buffer() const;
  // A checkpoint view of such a buffer.
  StateTensor flat_state(std::string name, const Buffer& buffer) const;
  // The span [offset, end) of the tensors lying wholly inside `range`: they have nothing but
  // their alignment padding between them (tensors do not overlap), so one kernel launch over
  // the span updates them, and leaves the padding zero as long as its gradient is (Note
  // [Padding stays zero], core/param_store.h). Empty (count 0) when `range` holds no whole
  // tensor.
  ParamRange tensors_span(ParamRange range) const;
  // Calls fn(entry) for every parameter tensor lying inside `range`.
  template <typename Fn>
  void for_each_in(ParamRange range, Fn&& fn) const {
    for (const ParamEntry& e : store_.entries()) {
      if (e.offset >= range.offset && e.offset + e.numel <= range.end()) fn(e);
    }
  }

  const ParamStore& store_;
  std::string communicate_;
  std::int64_t steps_ = 0;
  std::int64_t local_state_origin_ = 0;
  std::unique_ptr<DeviceStep> device_;  // on a CUDA store only
};

// Builds the optimizer named in the config over an allocated store (CPU or CUDA).
Result<std::unique_ptr<Optimizer>> make_optimizer(const OptimConfig& config,
                                                  const ParamStore& store);

}  // namespace sparq::optim
