// Residual: the skip connection of GPT-2 and BERT blocks, y = a + branch(a) (forward takes
// the branch's output as b: y = a + b).
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). No parameters.
// The add itself passes dy unchanged to both summands, so the caller runs the branch's
// backward on dy directly (no copy). What is left is the fork: `a` fed both the skip and
// the branch, so its gradient is the sum of the two paths, dx = dy + dbranch, where
// dbranch is the branch's input gradient. backward() computes exactly that, elementwise
// (dy[i] + dbranch[i], one rounding), and dx may alias dy or dbranch: the models update
// the stream's gradient in place. The same join serves any tensor read by two consumers
// (BERT's first-token rows, read by the MLM head and the pooler). y may alias a or b.
// Runs in the context its model binds (Note [Layer dispatch]); on CUDA through
// layers/cuda/residual_cuda.h, which gives the CPU's bits.
#pragma once

#include <string>

#include "core/tensor.h"
#include "layers/param_set.h"

namespace sparq {

class Residual : public LayerBase {
 public:
  explicit Residual(std::string name = "residual") : name_(std::move(name)) {}
  // a, b, y: f32 on the context's device with the same element count.
  void forward(const Tensor& a, const Tensor& b, const Tensor& y) const;
  // dy, dbranch, dx: f32 on the context's device, same element count; dx = dy + dbranch.
  void backward(const Tensor& dy, const Tensor& dbranch, const Tensor& dx) const;

 private:
  std::string name_;
};

}  // namespace sparq
