// Residual add: y = a + b, the skip connection of GPT-2 and BERT blocks. Its backward is
// the gradient fan-out: both inputs receive dy.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). No parameters.
// da or db may alias dy, in which case that copy is skipped; an empty da or db is skipped.
// y may alias a or b.
#pragma once

#include <string>

#include "core/tensor.h"

namespace sparq {

class Residual {
 public:
  explicit Residual(std::string name = "residual") : name_(std::move(name)) {}
  void forward(const Tensor& a, const Tensor& b, const Tensor& y) const;
  void backward(const Tensor& dy, const Tensor& da, const Tensor& db) const;

 private:
  std::string name_;
};

}  // namespace sparq
