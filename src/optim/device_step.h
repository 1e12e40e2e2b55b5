// What every optimizer over a CUDA ParamStore needs besides its moments: the weight-decay table
// that its single fused kernel reads (optim/cuda/optimizer_cuda.h explains the table), zeroed
// state buffers ordered on the compute stream, and global-norm clipping on the device whose
// scale the next step() folds into that kernel. CUDA-free header; owned by Optimizer.
#pragma once

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/param_store.h"

namespace sparq::optim {

// One byte per aligned chunk of ParamStore::kAlignFloats floats of the flat layout: 1 where
// the chunk's tensor has weight_decay. Every chunk belongs to exactly one tensor (tensors
// start on chunk boundaries and their padding ends before the next), and chunks that hold no
// tensor (none exist today) would read 0. Host-side, so CPU tests check it.
std::vector<std::uint8_t> decay_chunk_table(const ParamStore& store);

class DeviceStep {
 public:
  // `store` is allocated on CUDA and outlives this. Uploads the decay table, allocates the
  // clipping scratch, and waits for the device, so everything queued before (the store's
  // initial copy included) is complete before the first optimizer kernel.
  explicit DeviceStep(const ParamStore& store);
  ~DeviceStep();
  DeviceStep(const DeviceStep&) = delete;
  DeviceStep& operator=(const DeviceStep&) = delete;

  // `floats` zeroed device floats; the zeroing is queued on the compute stream, so it is
  // ordered before every kernel of the optimizer.
  Buffer zeroed_state(std::int64_t floats) const;
  const std::uint8_t* decay_table() const { return decay_table_.as<std::uint8_t>(); }

  // The global norm of the store's gradient buffer (cuda::global_norm: deterministic, in
  // double) and, with max_norm > 0, the clip scale, left on the device for the next step().
  // The gradient buffer is not modified. Blocks on the compute stream for ONE 8-byte
  // device-to-host copy: the norm, which the host needs for its metrics and skip decision.
  double clip_grad_norm(double max_norm);
  // Local clipping (Optimizer::clip_local_gradient): the same norm, and with max_norm > 0 the
  // gradient buffer scaled IN PLACE by clip_scale (update_math.h) on the compute stream, for
  // the kernels that read it before the exchange; no scale is left pending for step(). Blocks
  // for the 8-byte norm, which the host needs for the scale and the metrics (local clipping
  // holds the step's exchange back until backward ends anyway, data_parallel.h).
  double clip_in_place(double max_norm);
  // The device address of the pending clip scale, or nullptr when none is pending; a scale is
  // consumed by the step that takes it.
  const float* take_grad_scale();
  // The guarded form (Optimizer::clip_grad_norm_on_device): the same norm and scale without
  // the read-back; the next step takes the norm as its guard (take_guard) and read_norm()
  // then blocks for the 8-byte copy, queued behind that step.
  void clip_grad_norm_on_device(double max_norm);
  const double* take_guard();
  double read_norm();

 private:
  const ParamStore& store_;
  Buffer decay_table_;  // device, flat_numel / kAlignFloats bytes
  Buffer partials_;     // device, cuda::kNormBlocks doubles
  Buffer result_;       // device: the norm (double), then the scale (float)
  Buffer norm_host_;    // pinned, one double
  bool scale_pending_ = false;
  bool guard_pending_ = false;
};

}  // namespace sparq::optim
