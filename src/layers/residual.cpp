#include "layers/residual.h"

#include "core/ops.h"
#include "layers/activation.h"

namespace sparq {

void Residual::forward(const Tensor& a, const Tensor& b, const Tensor& y) const {
  const auto n = check_same_numel(a, b, name_, "a", "b");
  check_same_numel(a, y, name_, "a", "y");
  ops::add(a.data<float>(), b.data<float>(), y.data<float>(), static_cast<std::size_t>(n));
}

void Residual::backward(const Tensor& dy, const Tensor& da, const Tensor& db) const {
  for (const auto& [d, what] : {std::pair{&da, "da"}, std::pair{&db, "db"}}) {
    if (d->empty()) continue;
    const auto n = check_same_numel(dy, *d, name_, "dy", what);
    if (d->raw() != dy.raw()) ops::copy(dy.data<float>(), d->data<float>(), n);
  }
}

}  // namespace sparq
