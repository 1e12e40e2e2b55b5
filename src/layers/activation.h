// Elementwise activations: ReLU (VGG), GELU in its tanh (GPT-2) and exact erf (BERT) forms,
// and Tanh (BERT pooler). Shapes are free: x, y, dy, dx all hold the same element count.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). No parameters.
//
// What backward reads: ReLU and Tanh read the forward OUTPUT y (so forward may run in place,
// x == y); GELU reads the forward INPUT x. dx may alias dy.
//
// Each runs in the context its model binds (Note [Layer dispatch]): cpu:: below, or the
// kernels of layers/cuda/activation_cuda.h. GELU's formulas are shared by both
// (layers/gelu_math.h); on float CPU data their tanh/erf/exp are vector_math.h's
// vectorizable ones (absolute error within 6e-7), elsewhere libm's.
#pragma once

#include <string>

#include "core/tensor.h"
#include "layers/gelu_math.h"
#include "layers/param_set.h"

namespace sparq {

namespace cpu {
template <typename T>
void relu_forward(const T* x, T* y, std::int64_t n);
template <typename T>
void relu_backward(const T* y, const T* dy, T* dx, std::int64_t n);
template <typename T>
void gelu_forward(GeluKind kind, const T* x, T* y, std::int64_t n);
template <typename T>
void gelu_backward(GeluKind kind, const T* x, const T* dy, T* dx, std::int64_t n);
template <typename T>
void tanh_forward(const T* x, T* y, std::int64_t n);
template <typename T>
void tanh_backward(const T* y, const T* dy, T* dx, std::int64_t n);
}  // namespace cpu

class Relu : public LayerBase {
 public:
  explicit Relu(std::string name = "relu") : name_(std::move(name)) {}
  void forward(const Tensor& x, const Tensor& y) const;
  void backward(const Tensor& y, const Tensor& dy, const Tensor& dx) const;

 private:
  std::string name_;
};

class Gelu : public LayerBase {
 public:
  explicit Gelu(GeluKind kind, std::string name = "gelu") : kind_(kind), name_(std::move(name)) {}
  void forward(const Tensor& x, const Tensor& y) const;
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) const;
  GeluKind kind() const { return kind_; }

 private:
  GeluKind kind_;
  std::string name_;
};

class Tanh : public LayerBase {
 public:
  explicit Tanh(std::string name = "tanh") : name_(std::move(name)) {}
  void forward(const Tensor& x, const Tensor& y) const;
  void backward(const Tensor& y, const Tensor& dy, const Tensor& dx) const;

 private:
  std::string name_;
};

// Checks that `a` and `b` are non-empty f32 views on `device` (the layer's context's, Note
// [Layer dispatch]) with the same element count; returns that count.
std::int64_t check_same_numel(const Tensor& a, const Tensor& b, const std::string& layer,
                              const char* a_name, const char* b_name,
                              Device device = Device::kCPU);

}  // namespace sparq
