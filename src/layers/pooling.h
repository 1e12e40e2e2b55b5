// Pooling on NCHW tensors and Flatten.
//   MaxPool2d: kernel, stride, padding (padded cells never win), as torch.nn.MaxPool2d with
//     floor output size. Forward records the argmax (index within the H*W plane) of every
//     output cell in a cache the layer owns, sized for max_batch at construction; backward
//     routes dy to those positions (ties go to the first maximum in scan order).
//   AdaptiveAvgPool2d: output (out_h, out_w); cell (i, j) averages rows
//     [floor(i*H/out_h), ceil((i+1)*H/out_h)) and likewise columns, as PyTorch does;
//     (1, 1) is global average pooling. No cache.
//   flatten(): [N, C, H, W] -> [N, C*H*W], a view of the same storage (its "backward" is
//     the same reshape of dy).
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). No parameters.
#pragma once

#include <string>

#include "core/buffer.h"
#include "core/tensor.h"
#include "layers/param_set.h"

namespace sparq {

struct PoolGeom {
  std::int64_t planes = 0, h = 0, w = 0;  // planes = N * C
  std::int64_t out_h = 0, out_w = 0;
  std::int64_t kernel = 1, stride = 1, padding = 0;  // max pooling only
};

namespace cpu {
template <typename T>
void max_pool_forward(const PoolGeom& g, const T* x, T* y, std::int32_t* argmax);
template <typename T>
void max_pool_backward(const PoolGeom& g, const std::int32_t* argmax, const T* dy, T* dx);
template <typename T>
void avg_pool_forward(const PoolGeom& g, const T* x, T* y);
template <typename T>
void avg_pool_backward(const PoolGeom& g, const T* dy, T* dx);
}  // namespace cpu

class MaxPool2d : public LayerBase {
 public:
  struct Config {
    std::int64_t channels = 0, in_h = 0, in_w = 0;
    std::int64_t kernel = 2, stride = 2, padding = 0;
    std::int64_t max_batch = 0;
  };
  MaxPool2d(std::string name, Config config);

  void forward(const Tensor& x, const Tensor& y);
  void backward(const Tensor& dy, const Tensor& dx) const;
  Shape output_shape(std::int64_t n) const;
  std::size_t cache_bytes() const { return argmax_.size(); }

 private:
  PoolGeom geom(std::int64_t n) const;
  std::string name_;
  Config config_;
  Buffer argmax_;
  std::int64_t batch_ = 0;  // of the last forward
};

class AdaptiveAvgPool2d : public LayerBase {
 public:
  AdaptiveAvgPool2d(std::string name, std::int64_t out_h, std::int64_t out_w);
  // x [N, C, H, W] -> y [N, C, out_h, out_w]; dx gets x's shape.
  void forward(const Tensor& x, const Tensor& y) const;
  void backward(const Tensor& dy, const Tensor& dx) const;

 private:
  PoolGeom geom(const Shape& in, const Shape& out, const char* in_name, const char* out_name) const;
  std::string name_;
  std::int64_t out_h_, out_w_;
};

// [N, ...] -> [N, product of the rest], sharing storage.
Tensor flatten(const Tensor& x);

}  // namespace sparq
