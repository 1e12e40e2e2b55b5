// Launchers of the fused optimizer kernels (optimizer_kernels.cu): one launch over the WHOLE
// flat store per step, each thread running optim/update_math.h's per-element update, so the
// device computes exactly the CPU loops' expressions. Asynchronous on `stream`. fmt-free.
//
// Weight decay is per tensor, and tensors are not grouped by their flag (a model alternates
// weights and biases), so one launch per run of equal flags would cost dozens of launches a
// step. Instead a decay table is uploaded once: ParamStore starts every tensor on a 64-float
// boundary and pads it with zeros to the next, so every aligned chunk of kDecayChunkFloats
// floats belongs to exactly one tensor, and one byte per chunk (1 = the tensor decays) is the
// whole per-element mask, at 1/256 of the buffer's size and read as a warp-wide broadcast.
// The padding goes through the same update: with p = g = state = 0 every rule leaves it 0.
//
// Shared preconditions: params, grads and state are device f32 arrays of `n` elements, n a
// multiple of kDecayChunkFloats; decay holds n / kDecayChunkFloats bytes; element i decays by
// (decay[i / kDecayChunkFloats] ? weight_decay : 0). grad_scale is the device address of the
// global-norm clip scale (global_norm_cuda.h), multiplied into each gradient as it is read
// (the gradient buffer itself is not written), or nullptr for an unclipped step. guard_norm,
// when not nullptr, is the device address of the aggregate's global norm: a step whose norm
// is not finite leaves everything as it was (the step the host would have skipped; used when
// the host does not wait for the norm before enqueueing the step, DeviceStep::take_guard).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "optim/update_math.h"

namespace sparq::optim::cuda {

constexpr std::int64_t kDecayChunkFloats = 64;

// sgd_momentum_update per element, or sgd_plain_update when momentum is nullptr.
void sgd_step(float* params, const float* grads, float* momentum, const std::uint8_t* decay,
              std::int64_t n, const SgdScalars& scalars, float weight_decay,
              const float* grad_scale, const double* guard_norm, cudaStream_t stream);

// adam_update per element, or adam_frozen_update (grads hold the aggregated momentum; m is
// not touched and v only read) when `frozen`.
void adam_step(float* params, const float* grads, float* m, float* v, const std::uint8_t* decay,
               std::int64_t n, const AdamScalars& scalars, bool frozen, float weight_decay,
               const float* grad_scale, const double* guard_norm, cudaStream_t stream);

// grads[i] = adam_local_momentum(grads[i], params[i], wd_l2(i), beta1, one_minus_beta1, m[i])
// for i in [begin, end) (absolute indices of the flat layout); wd_l2(i) is weight_decay_l2
// where the element's tensor decays (pass 0 for adamw).
void adam_momentum_into_grads(float* grads, const float* params, float* m,
                              const std::uint8_t* decay, std::int64_t begin, std::int64_t end,
                              float weight_decay_l2, float beta1, float one_minus_beta1,
                              cudaStream_t stream);

// communicate: update (optimizer.h), before the exchange: for i in [begin, end),
//   adam: grads[i] = adam_local_direction(grads[i], params[i], wd_l2(i), scalars, m[i], v[i])
//   sgd:  grads[i] = sgd_local_direction(grads[i], params[i], wd(i), scalars, buf[i])
// (`momentum` nullptr: SGD without momentum). The gradients are this rank's, already clipped
// in place when clipping is on (local clipping, Optimizer::clip_local_gradient).
void adam_direction_into_grads(float* grads, const float* params, float* m, float* v,
                               const std::uint8_t* decay, std::int64_t begin, std::int64_t end,
                               float weight_decay_l2, const AdamScalars& scalars,
                               cudaStream_t stream);
void sgd_direction_into_grads(float* grads, const float* params, float* momentum,
                              const std::uint8_t* decay, std::int64_t begin, std::int64_t end,
                              float weight_decay, const SgdScalars& scalars, cudaStream_t stream);

// communicate: update, after the exchange: apply_averaged_update(grads[i] * scale, wd(i), lr,
// params[i]) over the whole store, wd(i) being `decoupled_weight_decay` where the tensor decays
// (AdamW; 0 for adam and sgd, whose decay is inside the direction). grad_scale and guard_norm
// as for the steps above.
void apply_update_step(float* params, const float* grads, const std::uint8_t* decay, std::int64_t n,
                       float decoupled_weight_decay, float lr, const float* grad_scale,
                       const double* guard_norm, cudaStream_t stream);

}  // namespace sparq::optim::cuda
