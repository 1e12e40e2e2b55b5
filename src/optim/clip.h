// Global-norm gradient clipping on the AGGREGATED gradient buffer, so every rank computes the
// same norm and applies the same scale (optim.clip_scope: aggregate), or on each rank's LOCAL
// gradient before it is communicated (clip_scope: local, data_parallel.h). Matches
// torch.nn.utils.clip_grad_norm_:
//   norm = sqrt(sum g^2) over all tensors; if norm > max_norm: g *= max_norm / (norm + 1e-6)
#pragma once

#include "core/param_store.h"

namespace sparq::optim {

// A CPU store's gradient, scaled in place. Returns the norm before clipping. max_norm <= 0 only
// measures. A CUDA store is clipped by Optimizer::clip_grad_norm instead (its scale is folded
// into the optimizer's kernel); this function refuses one.
double clip_grad_norm(const ParamStore& store, double max_norm);

}  // namespace sparq::optim
