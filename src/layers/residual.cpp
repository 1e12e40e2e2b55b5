#include "layers/residual.h"

#include "core/ops.h"
#include "core/profile.h"
#include "layers/activation.h"

#if SPARQ_HAS_CUDA
#include "layers/cuda/residual_cuda.h"
#endif

namespace sparq {
namespace {

// out = a + b on the context's device: the one operation both directions need.
void add_on(const LayerBase& layer, const Tensor& a, const Tensor& b, const Tensor& out,
            std::int64_t n) {
  if (layer.on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::residual_add(a.data<float>(), b.data<float>(), out.data<float>(), n, layer.stream());
#endif
  } else {
    ops::add(a.data<float>(), b.data<float>(), out.data<float>(), static_cast<std::size_t>(n));
  }
}

}  // namespace

void Residual::forward(const Tensor& a, const Tensor& b, const Tensor& y) const {
  SPARQ_PROFILE_SCOPE("residual.forward");  // Note [Profile scopes]
  const auto n = check_same_numel(a, b, name_, "a", "b", device());
  check_same_numel(a, y, name_, "a", "y", device());
  add_on(*this, a, b, y, n);
}

void Residual::backward(const Tensor& dy, const Tensor& dbranch, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("residual.backward");  // Note [Profile scopes]
  const auto n = check_same_numel(dy, dbranch, name_, "dy", "dbranch", device());
  check_same_numel(dy, dx, name_, "dy", "dx", device());
  add_on(*this, dy, dbranch, dx, n);
}

}  // namespace sparq
