// The optimizers' per-element update math (and the clip scale), shared by the CPU loops (sgd.cpp, adam.cpp) and the
// CUDA kernels (optim/cuda/optimizer_kernels.cu): one definition, so both devices run the same
// expressions in the same order with the same float/double mix (core/host_device.h). The
// per-step scalars (learning rate, bias corrections in double, ...) are computed once on the
// host (sgd_scalars, adam_scalars) and passed by value; everything here is f32.
//
// `g` is the gradient as the update should see it (already clipped), `wd` the weight decay of
// the element's tensor (0 when its spec has weight_decay off). The rules are those of sgd.h
// and adam.h; changing an expression here changes the CPU's bits (the checksum rule).
//
// Free of fmt and of anything nvcc cannot compile: core/host_device.h and <cmath> only.
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace sparq::optim {

// SGD's per-step scalars (sgd_scalars() in sgd.h builds them from the config).
struct SgdScalars {
  float lr = 0.0f;
  float momentum = 0.0f;
  float damp = 1.0f;   // 1 - dampening
  bool first = true;   // the first step initialises the momentum buffer with the gradient
  bool nesterov = false;
};

// Without momentum: p -= lr * (g + wd * p).
SPARQ_HOST_DEVICE inline void sgd_plain_update(float g, float wd, const SgdScalars& s, float& p) {
  const float d = g + wd * p;
  p -= s.lr * d;
}

// With momentum (buf is this element's slot of the momentum buffer):
//   d = g + wd p;  buf = first ? d : mu buf + (1 - dampening) d;  d = nesterov ? d + mu buf : buf
//   p -= lr d
SPARQ_HOST_DEVICE inline void sgd_momentum_update(float g, float wd, const SgdScalars& s, float& p,
                                                  float& buf) {
  float d = g + wd * p;
  buf = s.first ? d : s.momentum * buf + s.damp * d;
  d = s.nesterov ? d + s.momentum * buf : buf;
  p -= s.lr * d;
}

// Adam's per-step scalars (adam_scalars() in adam.h builds them from the config and the step).
struct AdamScalars {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float step_size = 0.0f;     // lr / (1 - beta1^t); lr itself once the variance is frozen
  float inv_sqrt_bc2 = 1.0f;  // 1 / sqrt(1 - beta2^t), t frozen at freeze_steps
  bool decoupled = false;     // adamw: p *= 1 - lr wd; adam: g += wd p
};

// One Adam/AdamW step of one element.
SPARQ_HOST_DEVICE inline void adam_update(float g, float wd, const AdamScalars& s, float& p,
                                          float& m, float& v) {
  float gi = g;
  if (s.decoupled) {
    p *= 1.0f - s.lr * wd;
  } else {
    gi += wd * p;
  }
  m = s.beta1 * m + (1.0f - s.beta1) * gi;
  v = s.beta2 * v + (1.0f - s.beta2) * gi * gi;
  p -= s.step_size * m / (std::sqrt(v) * s.inv_sqrt_bc2 + s.eps);
}

// A step with the variance frozen (1-bit Adam style): `momentum` is the aggregated momentum
// that travelled in the gradient buffer; it becomes m. Adam's L2 decay was already folded in by
// adam_momentum_to_send; AdamW decays the weight here.
SPARQ_HOST_DEVICE inline void adam_frozen_update(float momentum, float wd, const AdamScalars& s,
                                                 float& p, float& m, float v) {
  if (s.decoupled) p *= 1.0f - s.lr * wd;
  m = momentum;
  p -= s.step_size * m / (std::sqrt(v) * s.inv_sqrt_bc2 + s.eps);
}

// What travels instead of the gradient once the variance is frozen: the local momentum
// b1 m + (1 - b1) (g + wd_l2 p), wd_l2 being the tensor's decay for adam and 0 for adamw.
SPARQ_HOST_DEVICE inline float adam_momentum_to_send(float g, float p, float m, float wd_l2,
                                                     float beta1) {
  return beta1 * m + (1.0f - beta1) * (g + wd_l2 * p);
}

// The factor global-norm clipping multiplies every gradient by (clip.h, after
// torch.nn.utils.clip_grad_norm_): max_norm / (norm + 1e-6), computed in double, where that is
// below 1; else 1, also when max_norm <= 0 (measure only) and for a NaN norm (whose step the
// trainer skips anyway).
SPARQ_HOST_DEVICE inline float clip_scale(double norm, double max_norm) {
  if (!(max_norm > 0.0)) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace sparq::optim
