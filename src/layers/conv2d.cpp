#include "layers/conv2d.h"

#include <algorithm>

#include "core/check.h"
#include "layers/matmul.h"

namespace sparq {
namespace cpu {
namespace {

// Row (c, i, j) of the column matrix holds x[c, oy*stride + i*dil - pad, ox*stride + j*dil -
// pad] for every output pixel (oy, ox), zero outside the image.
template <typename T>
void im2col(const Conv2dGeom& g, const T* x, T* col) {
  const std::int64_t oh = g.out_h(), ow = g.out_w();
#pragma omp parallel for schedule(static) if (g.col_rows() * oh * ow > 32768)
  for (std::int64_t row = 0; row < g.col_rows(); ++row) {
    const std::int64_t c = row / (g.r * g.s), i = row / g.s % g.r, j = row % g.s;
    const T* plane = x + c * g.h * g.w;
    T* out = col + row * oh * ow;
    for (std::int64_t oy = 0; oy < oh; ++oy) {
      const std::int64_t iy = oy * g.stride_h + i * g.dil_h - g.pad_h;
      T* dst = out + oy * ow;
      if (iy < 0 || iy >= g.h) {
        std::fill(dst, dst + ow, T(0));
        continue;
      }
      const T* src = plane + iy * g.w;
      const std::int64_t shift = j * g.dil_w - g.pad_w;
      if (g.stride_w == 1) {
        // Contiguous run: zero the borders, copy the middle.
        const std::int64_t lo = std::clamp<std::int64_t>(-shift, 0, ow);
        const std::int64_t hi = std::clamp<std::int64_t>(g.w - shift, lo, ow);
        std::fill(dst, dst + lo, T(0));
        std::copy(src + lo + shift, src + hi + shift, dst + lo);
        std::fill(dst + hi, dst + ow, T(0));
      } else {
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          const std::int64_t ix = ox * g.stride_w + shift;
          dst[ox] = (ix >= 0 && ix < g.w) ? src[ix] : T(0);
        }
      }
    }
  }
}

// The adjoint of im2col: dx = sum over column entries that read each pixel. Threads own
// input channels, so no two write the same pixel.
template <typename T>
void col2im(const Conv2dGeom& g, const T* col, T* dx) {
  const std::int64_t oh = g.out_h(), ow = g.out_w();
#pragma omp parallel for schedule(static) if (g.col_rows() * oh * ow > 32768)
  for (std::int64_t c = 0; c < g.c; ++c) {
    T* plane = dx + c * g.h * g.w;
    std::fill(plane, plane + g.h * g.w, T(0));
    for (std::int64_t i = 0; i < g.r; ++i) {
      for (std::int64_t j = 0; j < g.s; ++j) {
        const T* src = col + ((c * g.r + i) * g.s + j) * oh * ow;
        for (std::int64_t oy = 0; oy < oh; ++oy) {
          const std::int64_t iy = oy * g.stride_h + i * g.dil_h - g.pad_h;
          if (iy < 0 || iy >= g.h) continue;
          T* dst = plane + iy * g.w;
          const T* s_row = src + oy * ow;
          for (std::int64_t ox = 0; ox < ow; ++ox) {
            const std::int64_t ix = ox * g.stride_w + j * g.dil_w - g.pad_w;
            if (ix >= 0 && ix < g.w) dst[ix] += s_row[ox];
          }
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void conv2d_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* col) {
  const std::int64_t hw = g.col_cols(), crs = g.col_rows();
  for (std::int64_t n = 0; n < g.n; ++n) {
    const T* x_img = x + n * g.c * g.h * g.w;
    T* y_img = y + n * g.k * hw;
    const T* cols = x_img;
    if (!g.is_pointwise()) {
      im2col(g, x_img, col);
      cols = col;
    }
    matmul<T>(GemmShape{false, false, g.k, hw, crs}, T(1), w, cols, T(0), y_img);
    if (b == nullptr) continue;
#pragma omp parallel for schedule(static) if (g.k * hw > 32768)
    for (std::int64_t k = 0; k < g.k; ++k) {
      T* row = y_img + k * hw;
      for (std::int64_t p = 0; p < hw; ++p) row[p] += b[k];
    }
  }
}

template <typename T>
void conv2d_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw,
                     T* db, T* col) {
  const std::int64_t hw = g.col_cols(), crs = g.col_rows();
  for (std::int64_t n = 0; n < g.n; ++n) {
    const T* x_img = x + n * g.c * g.h * g.w;
    const T* dy_img = dy + n * g.k * hw;
    if (dw != nullptr) {
      const T* cols = x_img;
      if (!g.is_pointwise()) {
        im2col(g, x_img, col);
        cols = col;
      }
      matmul<T>(GemmShape{false, true, g.k, crs, hw}, T(1), dy_img, cols, T(1), dw);
    }
    if (dx != nullptr) {
      T* dx_img = dx + n * g.c * g.h * g.w;
      if (g.is_pointwise()) {
        matmul<T>(GemmShape{true, false, crs, hw, g.k}, T(1), w, dy_img, T(0), dx_img);
      } else {
        matmul<T>(GemmShape{true, false, crs, hw, g.k}, T(1), w, dy_img, T(0), col);
        col2im(g, col, dx_img);
      }
    }
  }
  if (db == nullptr) return;
#pragma omp parallel for schedule(static) if (g.n * g.k * hw > 32768)
  for (std::int64_t k = 0; k < g.k; ++k) {
    T acc = 0;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* row = dy + (n * g.k + k) * hw;
      for (std::int64_t p = 0; p < hw; ++p) acc += row[p];
    }
    db[k] += acc;
  }
}

template void conv2d_forward<float>(const Conv2dGeom&, const float*, const float*, const float*,
                                    float*, float*);
template void conv2d_forward<double>(const Conv2dGeom&, const double*, const double*,
                                     const double*, double*, double*);
template void conv2d_backward<float>(const Conv2dGeom&, const float*, const float*, const float*,
                                     float*, float*, float*, float*);
template void conv2d_backward<double>(const Conv2dGeom&, const double*, const double*,
                                      const double*, double*, double*, double*, double*);

}  // namespace cpu

Conv2d::Conv2d(std::string prefix, Config config) : ParamLayer(std::move(prefix)), config_(config) {
  const Config& c = config_;
  SPARQ_CHECK(c.in_channels > 0 && c.out_channels > 0 && c.kernel_h > 0 && c.kernel_w > 0,
              "{}: Conv2d needs positive channels and kernel, got {}->{} {}x{}", name(),
              c.in_channels, c.out_channels, c.kernel_h, c.kernel_w);
  SPARQ_CHECK(c.stride > 0 && c.dilation > 0 && c.padding >= 0,
              "{}: bad stride {} / dilation {} / padding {}", name(), c.stride, c.dilation,
              c.padding);
  const Conv2dGeom g = geom(1);
  SPARQ_CHECK(c.in_h > 0 && c.in_w > 0 && g.out_h() > 0 && g.out_w() > 0,
              "{}: input {}x{} gives an empty output for kernel {}x{}", name(), c.in_h, c.in_w,
              c.kernel_h, c.kernel_w);
  w_ = params_.add("weight", {c.out_channels, c.in_channels, c.kernel_h, c.kernel_w},
                   Init::kaiming_normal(), true);
  if (c.bias) b_ = params_.add("bias", {c.out_channels}, Init::zeros(), false);
  if (!g.is_pointwise()) col_ = Buffer::host(g.col_rows() * g.col_cols() * sizeof(float));
}

Conv2dGeom Conv2d::geom(std::int64_t n) const {
  const Config& c = config_;
  return Conv2dGeom{n, c.in_channels, c.in_h, c.in_w, c.out_channels, c.kernel_h, c.kernel_w,
                    c.stride, c.stride, c.padding, c.padding, c.dilation, c.dilation};
}

Shape Conv2d::output_shape(std::int64_t n) const {
  const Conv2dGeom g = geom(n);
  return {n, g.k, g.out_h(), g.out_w()};
}

void Conv2d::check_x(const Tensor& x) const {
  SPARQ_CHECK(x.ndim() == 4, "{}: x must be NCHW, got {}", name(), x.shape().str());
  check_arg(x, {x.dim(0), config_.in_channels, config_.in_h, config_.in_w}, name(), "x");
}

void Conv2d::forward(const Tensor& x, const Tensor& y) {
  check_x(x);
  check_arg(y, output_shape(x.dim(0)), name(), "y");
  cpu::conv2d_forward<float>(geom(x.dim(0)), x.data<float>(), params_.param(w_).data<float>(),
                             b_ >= 0 ? params_.param(b_).data<float>() : nullptr,
                             y.data<float>(), col_.as<float>());
}

void Conv2d::backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  check_x(x);
  check_arg(dy, output_shape(x.dim(0)), name(), "dy");
  if (!dx.empty()) check_arg(dx, x.shape(), name(), "dx");
  cpu::conv2d_backward<float>(geom(x.dim(0)), x.data<float>(), params_.param(w_).data<float>(),
                              dy.data<float>(), dx.empty() ? nullptr : dx.data<float>(),
                              params_.grad(w_).data<float>(),
                              b_ >= 0 ? params_.grad(b_).data<float>() : nullptr,
                              col_.as<float>());
}

}  // namespace sparq
