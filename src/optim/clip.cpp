#include "optim/clip.h"

#include <cmath>

#include "core/check.h"
#include "core/ops.h"
#include "optim/update_math.h"

namespace sparq::optim {

double clip_grad_norm(const ParamStore& store, double max_norm) {
  SPARQ_CHECK(store.device() == Device::kCPU,
              "clip_grad_norm(store) scales a host gradient buffer; a CUDA store is clipped by "
              "Optimizer::clip_grad_norm, which folds the scale into step()");
  // The whole flat buffer: the padding between tensors holds zeros (Note [Padding stays
  // zero], core/param_store.h), so it gives the tensors' sum.
  const auto n = static_cast<std::size_t>(store.flat_numel());
  const double norm = std::sqrt(ops::sum_squares(store.grads(), n));
  // A scale of exactly 1 (no clipping, or max_norm / (norm + 1e-6) rounding to 1) is skipped.
  const float scale = clip_scale(norm, max_norm);
  if (scale != 1.0f) ops::scale(store.grads(), n, scale);
  return norm;
}

}  // namespace sparq::optim
