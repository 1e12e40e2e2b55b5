// Pooling on NCHW tensors and Flatten.
//   MaxPool2d: kernel, stride, padding (padded cells never win), as torch.nn.MaxPool2d with
//     floor output size. Forward records the argmax (index within the H*W plane) of every
//     output cell in a cache the layer owns, sized for max_batch; backward routes dy to those
//     positions (ties go to the first maximum in scan order, on both devices).
//   AdaptiveAvgPool2d: output (out_h, out_w); cell (i, j) averages rows
//     [floor(i*H/out_h), ceil((i+1)*H/out_h)) and likewise columns, as PyTorch does;
//     (1, 1) is global average pooling. No cache.
//   flatten(): [N, C, H, W] -> [N, C*H*W], a view of the same storage (its "backward" is
//     the same reshape of dy).
//
// Devices (Note [Layer dispatch], layers/param_set.h): both pools run in their context (set by
// the model with bind_context()) on the CPU or on CUDA with sparq's own kernels
// (layers/cuda/pooling.cu; cuDNN's max-pool backward breaks ties its own way and is not
// deterministic). The device results are bit-identical to the CPU's: the window scan and the
// summation order are one shared function (layers/cuda/pooling_windows.h). MaxPool2d's argmax
// cache lives on the context's device: it is allocated on the host at construction and moved
// (allocated once on the device, the host one released) by the first forward in a CUDA context.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). No parameters.
#pragma once

#include <string>

#include "core/buffer.h"
#include "core/tensor.h"
#include "layers/cuda/pooling_windows.h"  // PoolGeom and the math shared with CUDA
#include "layers/param_set.h"

namespace sparq {

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
  // The argmax cache on the context's device (allocated there the first time it is not).
  std::int32_t* argmax_cache();
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
