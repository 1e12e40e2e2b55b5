#include "layers/residual.h"

#include "core/ops.h"
#include "layers/activation.h"

namespace sparq {

void Residual::forward(const Tensor& a, const Tensor& b, const Tensor& y) const {
  const auto n = check_same_numel(a, b, name_, "a", "b");
  check_same_numel(a, y, name_, "a", "y");
  ops::add(a.data<float>(), b.data<float>(), y.data<float>(), static_cast<std::size_t>(n));
}

void Residual::backward(const Tensor& dy, const Tensor& dbranch, const Tensor& dx) const {
  const auto n = check_same_numel(dy, dbranch, name_, "dy", "dbranch");
  check_same_numel(dy, dx, name_, "dy", "dx");
  ops::add(dy.data<float>(), dbranch.data<float>(), dx.data<float>(), static_cast<std::size_t>(n));
}

}  // namespace sparq
