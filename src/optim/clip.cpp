#include "optim/clip.h"

#include <cmath>

#include "core/ops.h"

namespace sparq::optim {

double clip_grad_norm(const ParamStore& store, double max_norm) {
  // Padding between tensors is zero, so the whole flat buffer gives the same sum.
  const auto n = static_cast<std::size_t>(store.flat_numel());
  const double norm = std::sqrt(ops::sum_squares(store.grads(), n));
  if (max_norm > 0.0) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) ops::scale(store.grads(), n, static_cast<float>(coef));
  }
  return norm;
}

}  // namespace sparq::optim
