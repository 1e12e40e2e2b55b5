// Conv2d on NCHW: y[N, K, Ho, Wo] = conv(x[N, C, H, W], W[K, C, R, S]) + b[K], any kernel,
// stride, padding (zeros) and dilation, as torch.nn.Conv2d (groups = 1).
// Ho = (H + 2*pad_h - dil_h*(R-1) - 1) / stride_h + 1, likewise Wo.
//
// GRADIENT RULE (every layer): backward OVERWRITES the input gradient dx and ACCUMULATES
// (+=) into dW and db.
//
// Method: per image, im2col into a column matrix [C*R*S, Ho*Wo], then one GEMM
// (W [K, CRS] * col); backward rebuilds the columns for dW += dY * col^T and scatters
// W^T * dY back with col2im. 1x1 / stride 1 / no padding skips the copy.
// Parameters: "<prefix>.weight" [K, C, R, S] (Kaiming normal, decay), "<prefix>.bias" [K]
// (zeros, no decay) when enabled. Workspace: the layer owns one column matrix, sized at
// construction from in_h/in_w, which forward and backward reuse; no per-step allocation.
#pragma once

#include "core/buffer.h"
#include "layers/param_set.h"

namespace sparq {

struct Conv2dGeom {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t k = 0, r = 0, s = 0;         // output channels, kernel height, width
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  std::int64_t out_h() const { return (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1; }
  std::int64_t out_w() const { return (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1; }
  std::int64_t col_rows() const { return c * r * s; }
  std::int64_t col_cols() const { return out_h() * out_w(); }
  // True when the column matrix of an image is the image itself.
  bool is_pointwise() const {
    return r == 1 && s == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
};

namespace cpu {
// col: workspace of col_rows() * col_cols() elements (unused when is_pointwise()).
template <typename T>
void conv2d_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* col);
// dx (overwritten) may be null; dw and db (+=) may be null.
template <typename T>
void conv2d_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw,
                     T* db, T* col);
}  // namespace cpu

class Conv2d : public ParamLayer {
 public:
  struct Config {
    std::int64_t in_channels = 0, out_channels = 0;
    std::int64_t kernel_h = 3, kernel_w = 3;
    std::int64_t stride = 1, padding = 0, dilation = 1;
    bool bias = true;
    std::int64_t in_h = 0, in_w = 0;  // input spatial size the workspace is sized for
  };
  Conv2d(std::string prefix, Config config);

  void forward(const Tensor& x, const Tensor& y);
  // dx may be empty (first layer: no input gradient needed).
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx);

  // Geometry for a batch of n images.
  Conv2dGeom geom(std::int64_t n) const;
  Shape output_shape(std::int64_t n) const;
  std::size_t cache_bytes() const { return col_.size(); }

 private:
  void check_x(const Tensor& x) const;
  Config config_;
  int w_ = -1, b_ = -1;
  Buffer col_;
};

}  // namespace sparq
