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

// Without momentum: p -= lr * (g + wd * p). Every multiply-add below is written out (Note
// [Written-out multiply-adds], core/host_device.h), so CPU and GPU steps agree bit for bit.
SPARQ_HOST_DEVICE inline void sgd_plain_update(float g, float wd, const SgdScalars& s, float& p) {
  const float d = mul_add(wd, p, g);
  p = mul_add(-s.lr, d, p);
}

// With momentum (buf is this element's slot of the momentum buffer):
//   d = g + wd p;  buf = first ? d : mu buf + (1 - dampening) d;  d = nesterov ? d + mu buf : buf
//   p -= lr d
SPARQ_HOST_DEVICE inline void sgd_momentum_update(float g, float wd, const SgdScalars& s, float& p,
                                                  float& buf) {
  float d = mul_add(wd, p, g);
  buf = s.first ? d : mul_add(s.momentum, buf, s.damp * d);
  d = s.nesterov ? mul_add(s.momentum, buf, d) : buf;
  p = mul_add(-s.lr, d, p);
}

// Adam's per-step scalars (adam_scalars() in adam.h builds them from the config and the step).
struct AdamScalars {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  // Set with the betas (adam_scalars builds all of them from the config).
  // 1 - beta rounded from double, as PyTorch passes it (alpha = 1 - beta, a host double): from
  // the f32 beta, 1 - beta was 1.3% off at beta 0.999999 and a few ulps off at 0.9 (Note
  // [Betas and eps in f32], optimizer.cpp; review, 2026-12-07).
  float one_minus_beta1 = 0.1f;
  float one_minus_beta2 = 0.001f;
  float eps = 1e-8f;
  float step_size = 0.0f;     // lr / (1 - beta1^t), frozen variance or not (adam.h)
  // 1 / sqrt(1 - beta2^t); when frozen, t is v's update count at the freeze
  // (Note [Frozen variance's bias correction], adam.h).
  float inv_sqrt_bc2 = 1.0f;
  bool decoupled = false;     // adamw: p *= 1 - lr wd; adam: g += wd p
};

// One Adam/AdamW step of one element.
SPARQ_HOST_DEVICE inline void adam_update(float g, float wd, const AdamScalars& s, float& p,
                                          float& m, float& v) {
  float gi = g;
  if (s.decoupled) {
    p *= mul_add(-s.lr, wd, 1.0f);
  } else {
    gi = mul_add(wd, p, gi);
  }
  m = mul_add(s.beta1, m, s.one_minus_beta1 * gi);
  v = mul_add(s.beta2, v, s.one_minus_beta2 * gi * gi);
  p -= s.step_size * m / mul_add(std::sqrt(v), s.inv_sqrt_bc2, s.eps);
}

// communicate: momentum (adam.h): a step with the variance frozen. `momentum` is the
// aggregated momentum that travelled in the gradient buffer; it is applied, never adopted as
// this rank's m (Note [Sparse momentum rule], adam.h). Adam's L2 decay was already folded in by
// adam_local_momentum; AdamW decays the weight here.
SPARQ_HOST_DEVICE inline void adam_frozen_update(float momentum, float wd, const AdamScalars& s,
                                                 float& p, float v) {
  if (s.decoupled) p *= mul_add(-s.lr, wd, 1.0f);
  p -= s.step_size * momentum / mul_add(std::sqrt(v), s.inv_sqrt_bc2, s.eps);
}

// Note [Local state and non-finite gradients]
// In the modes that keep per-rank optimizer state (communicate: momentum and update), the
// local rule runs BEFORE the exchange, on this rank's own gradient. A NaN or Inf there makes
// the step skip on every rank (Note [Non-finite local gradients], gradient_exchange.h), but the
// state must not take it in: a NaN kept in m or v would make every later direction NaN, so
// every later step would be skipped too. So an element whose input is not finite keeps its
// state as it was, and the non-finite value still goes out as the direction, where the
// exchange detects it. Finite inputs are unaffected, bit for bit. (The other ranks, whose
// inputs were finite, do advance their state on the skipped step; it is theirs alone, and
// training goes on from it.)

// communicate: momentum: this rank's momentum m = b1 m + (1 - b1) (g + wd_l2 p) (wd_l2 the
// tensor's decay for adam, 0 for adamw) is kept as local state and is what travels.
// (one_minus_beta1: AdamScalars::one_minus_beta1.)
SPARQ_HOST_DEVICE inline float adam_local_momentum(float g, float p, float wd_l2, float beta1,
                                                   float one_minus_beta1, float& m) {
  const float gi = mul_add(wd_l2, p, g);
  const float m_new = mul_add(beta1, m, one_minus_beta1 * gi);
  m = std::isfinite(gi) ? m_new : m;  // Note [Local state and non-finite gradients]
  return m_new;
}

// communicate: update (optimizer.h): this rank's Adam direction from its own gradient and its
// own moments, m_hat / (sqrt(v_hat) + eps), with `s` built for lr = 1 (so s.step_size is the
// bias correction 1 / (1 - b1^t)). The learning rate multiplies the averaged direction.
SPARQ_HOST_DEVICE inline float adam_local_direction(float g, float p, float wd_l2,
                                                    const AdamScalars& s, float& m, float& v) {
  const float gi = mul_add(wd_l2, p, g);
  const float m_new = mul_add(s.beta1, m, s.one_minus_beta1 * gi);
  const float v_new = mul_add(s.beta2, v, s.one_minus_beta2 * gi * gi);
  // Note [Local state and non-finite gradients]. A select, not a branch: the loops stay
  // vectorised, and finite inputs give the same bits as before.
  const bool finite = std::isfinite(gi);
  m = finite ? m_new : m;
  v = finite ? v_new : v;
  return s.step_size * m_new / mul_add(std::sqrt(v_new), s.inv_sqrt_bc2, s.eps);
}

// communicate: update: SGD's direction from this rank's gradient and momentum buffer, the
// rule of sgd_momentum_update without the parameter step (buf unused without momentum).
SPARQ_HOST_DEVICE inline float sgd_local_direction(float g, float p, float wd, const SgdScalars& s,
                                                   float& buf) {
  float d = mul_add(wd, p, g);
  if (s.momentum > 0.0f) {
    const float buf_new = s.first ? d : mul_add(s.momentum, buf, s.damp * d);
    const float out = s.nesterov ? mul_add(s.momentum, buf_new, d) : buf_new;
    buf = std::isfinite(d) ? buf_new : buf;  // Note [Local state and non-finite gradients]
    return out;
  }
  return d;
}

// communicate: update: applies the averaged direction `u` with AdamW's decoupled decay
// (decoupled_wd; 0 otherwise: L2 decay is inside the direction): p -= lr (u + wd p), which is
// p (1 - lr wd) - lr u. Written as one product, its multiply-adds written out.
SPARQ_HOST_DEVICE inline void apply_averaged_update(float u, float decoupled_wd, float lr,
                                                    float& p) {
  p = mul_add(-lr, mul_add(decoupled_wd, p, u), p);
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
