#include "layers/pooling.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "layers/param_set.h"

namespace sparq {
namespace cpu {

template <typename T>
void max_pool_forward(const PoolGeom& g, const T* x, T* y, std::int32_t* argmax) {
#pragma omp parallel for schedule(static) if (g.planes * g.h * g.w > 32768)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const T* plane = x + p * g.h * g.w;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        T best = -std::numeric_limits<T>::infinity();
        std::int32_t best_at = -1;
        for (std::int64_t i = 0; i < g.kernel; ++i) {
          const std::int64_t iy = oy * g.stride - g.padding + i;
          if (iy < 0 || iy >= g.h) continue;
          for (std::int64_t j = 0; j < g.kernel; ++j) {
            const std::int64_t ix = ox * g.stride - g.padding + j;
            if (ix < 0 || ix >= g.w) continue;
            const T v = plane[iy * g.w + ix];
            // A NaN wins, as in PyTorch, so it propagates instead of vanishing.
            if (best_at < 0 || v > best || v != v) {
              best = v;
              best_at = static_cast<std::int32_t>(iy * g.w + ix);
              if (v != v) break;
            }
          }
        }
        const std::int64_t o = (p * g.out_h + oy) * g.out_w + ox;
        y[o] = best;
        argmax[o] = best_at;
      }
    }
  }
}

template <typename T>
void max_pool_backward(const PoolGeom& g, const std::int32_t* argmax, const T* dy, T* dx) {
#pragma omp parallel for schedule(static) if (g.planes * g.h * g.w > 32768)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    T* plane = dx + p * g.h * g.w;
    std::fill(plane, plane + g.h * g.w, T(0));
    const std::int64_t base = p * g.out_h * g.out_w;
    for (std::int64_t o = 0; o < g.out_h * g.out_w; ++o) plane[argmax[base + o]] += dy[base + o];
  }
}

namespace {
std::int64_t window_begin(std::int64_t i, std::int64_t in, std::int64_t out) { return i * in / out; }
std::int64_t window_end(std::int64_t i, std::int64_t in, std::int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}
}  // namespace

template <typename T>
void avg_pool_forward(const PoolGeom& g, const T* x, T* y) {
#pragma omp parallel for schedule(static) if (g.planes * g.h * g.w > 32768)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const T* plane = x + p * g.h * g.w;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      const std::int64_t y0 = window_begin(oy, g.h, g.out_h), y1 = window_end(oy, g.h, g.out_h);
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        const std::int64_t x0 = window_begin(ox, g.w, g.out_w), x1 = window_end(ox, g.w, g.out_w);
        T acc = 0;
        for (std::int64_t iy = y0; iy < y1; ++iy) {
          for (std::int64_t ix = x0; ix < x1; ++ix) acc += plane[iy * g.w + ix];
        }
        y[(p * g.out_h + oy) * g.out_w + ox] = acc / static_cast<T>((y1 - y0) * (x1 - x0));
      }
    }
  }
}

template <typename T>
void avg_pool_backward(const PoolGeom& g, const T* dy, T* dx) {
#pragma omp parallel for schedule(static) if (g.planes * g.h * g.w > 32768)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    T* plane = dx + p * g.h * g.w;
    std::fill(plane, plane + g.h * g.w, T(0));
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      const std::int64_t y0 = window_begin(oy, g.h, g.out_h), y1 = window_end(oy, g.h, g.out_h);
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        const std::int64_t x0 = window_begin(ox, g.w, g.out_w), x1 = window_end(ox, g.w, g.out_w);
        const T share =
            dy[(p * g.out_h + oy) * g.out_w + ox] / static_cast<T>((y1 - y0) * (x1 - x0));
        for (std::int64_t iy = y0; iy < y1; ++iy) {
          for (std::int64_t ix = x0; ix < x1; ++ix) plane[iy * g.w + ix] += share;
        }
      }
    }
  }
}

#define SPARQ_INSTANTIATE_POOLING(T)                                                     \
  template void max_pool_forward<T>(const PoolGeom&, const T*, T*, std::int32_t*);       \
  template void max_pool_backward<T>(const PoolGeom&, const std::int32_t*, const T*, T*); \
  template void avg_pool_forward<T>(const PoolGeom&, const T*, T*);                      \
  template void avg_pool_backward<T>(const PoolGeom&, const T*, T*);
SPARQ_INSTANTIATE_POOLING(float)
SPARQ_INSTANTIATE_POOLING(double)
#undef SPARQ_INSTANTIATE_POOLING

}  // namespace cpu

MaxPool2d::MaxPool2d(std::string name, Config config) : name_(std::move(name)), config_(config) {
  const Config& c = config_;
  SPARQ_CHECK(c.kernel > 0 && c.stride > 0 && c.padding >= 0 && 2 * c.padding <= c.kernel,
              "{}: bad kernel {} / stride {} / padding {} (padding at most half the kernel)",
              name_, c.kernel, c.stride, c.padding);
  SPARQ_CHECK(c.channels > 0 && c.max_batch > 0 && c.in_h + 2 * c.padding >= c.kernel &&
                  c.in_w + 2 * c.padding >= c.kernel,
              "{}: input {}x{}x{} (max batch {}) is too small for kernel {}", name_, c.channels,
              c.in_h, c.in_w, c.max_batch, c.kernel);
  const PoolGeom g = geom(c.max_batch);
  argmax_ = Buffer::host(g.planes * g.out_h * g.out_w * sizeof(std::int32_t));
}

PoolGeom MaxPool2d::geom(std::int64_t n) const {
  const Config& c = config_;
  return PoolGeom{n * c.channels,
                  c.in_h,
                  c.in_w,
                  (c.in_h + 2 * c.padding - c.kernel) / c.stride + 1,
                  (c.in_w + 2 * c.padding - c.kernel) / c.stride + 1,
                  c.kernel,
                  c.stride,
                  c.padding};
}

Shape MaxPool2d::output_shape(std::int64_t n) const {
  const PoolGeom g = geom(n);
  return {n, config_.channels, g.out_h, g.out_w};
}

void MaxPool2d::forward(const Tensor& x, const Tensor& y) {
  SPARQ_CHECK(x.ndim() == 4, "{}: x must be NCHW, got {}", name_, x.shape().str());
  const std::int64_t n = x.dim(0);
  check_arg(x, {n, config_.channels, config_.in_h, config_.in_w}, name_, "x");
  SPARQ_CHECK(n <= config_.max_batch, "{}: batch {} exceeds the cache's max_batch {}", name_, n,
              config_.max_batch);
  check_arg(y, output_shape(n), name_, "y");
  batch_ = n;
  cpu::max_pool_forward<float>(geom(n), x.data<float>(), y.data<float>(),
                               argmax_.as<std::int32_t>());
}

void MaxPool2d::backward(const Tensor& dy, const Tensor& dx) const {
  check_arg(dy, output_shape(batch_), name_, "dy (batch of the last forward)");
  check_arg(dx, {batch_, config_.channels, config_.in_h, config_.in_w}, name_, "dx");
  cpu::max_pool_backward<float>(geom(batch_), argmax_.as<std::int32_t>(), dy.data<float>(),
                                dx.data<float>());
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::string name, std::int64_t out_h, std::int64_t out_w)
    : name_(std::move(name)), out_h_(out_h), out_w_(out_w) {
  SPARQ_CHECK(out_h > 0 && out_w > 0, "{}: output size must be positive, got {}x{}", name_, out_h,
              out_w);
}

PoolGeom AdaptiveAvgPool2d::geom(const Shape& in, const Shape& out, const char* in_name,
                                 const char* out_name) const {
  SPARQ_CHECK(in.ndim() == 4, "{}: {} must be NCHW, got {}", name_, in_name, in.str());
  const Shape expected{in[0], in[1], out_h_, out_w_};
  SPARQ_CHECK(out == expected, "{}: {} has shape {}, expected {}", name_, out_name, out.str(),
              expected.str());
  return PoolGeom{in[0] * in[1], in[2], in[3], out_h_, out_w_};
}

void AdaptiveAvgPool2d::forward(const Tensor& x, const Tensor& y) const {
  check_arg(x, x.shape(), name_, "x");
  check_arg(y, y.shape(), name_, "y");
  cpu::avg_pool_forward<float>(geom(x.shape(), y.shape(), "x", "y"), x.data<float>(),
                               y.data<float>());
}

void AdaptiveAvgPool2d::backward(const Tensor& dy, const Tensor& dx) const {
  check_arg(dy, dy.shape(), name_, "dy");
  check_arg(dx, dx.shape(), name_, "dx");
  cpu::avg_pool_backward<float>(geom(dx.shape(), dy.shape(), "dx", "dy"), dy.data<float>(),
                                dx.data<float>());
}

Tensor flatten(const Tensor& x) {
  SPARQ_CHECK(x.ndim() >= 1, "flatten: needs at least one dimension, got {}", x.shape().str());
  const std::int64_t n = x.dim(0);
  return x.reshape({n, n == 0 ? 0 : x.numel() / n});
}

}  // namespace sparq
