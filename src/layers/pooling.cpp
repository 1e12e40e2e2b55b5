#include "layers/pooling.h"

#include <algorithm>

#include "core/check.h"
#include "core/profile.h"
#include "layers/param_set.h"

#if SPARQ_HAS_CUDA
#include "layers/cuda/pooling_cuda.h"
#endif

namespace sparq {
namespace cpu {

template <typename T>
void max_pool_forward(const PoolGeom& g, const T* x, T* y, std::int32_t* argmax) {
#pragma omp parallel for schedule(static) if (g.planes * g.h * g.w > 32768)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const T* plane = x + p * g.h * g.w;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        const std::int64_t o = (p * g.out_h + oy) * g.out_w + ox;
        argmax[o] = pooling::max_pool_cell(g, plane, oy, ox, &y[o]);
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

template <typename T>
void avg_pool_forward(const PoolGeom& g, const T* x, T* y) {
#pragma omp parallel for schedule(static) if (g.planes * g.h * g.w > 32768)
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const T* plane = x + p * g.h * g.w;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        y[(p * g.out_h + oy) * g.out_w + ox] = pooling::avg_pool_cell(g, plane, oy, ox);
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
      const std::int64_t y0 = pooling::adaptive_begin(oy, g.h, g.out_h);
      const std::int64_t y1 = pooling::adaptive_end(oy, g.h, g.out_h);
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        const std::int64_t x0 = pooling::adaptive_begin(ox, g.w, g.out_w);
        const std::int64_t x1 = pooling::adaptive_end(ox, g.w, g.out_w);
        const T share =
            dy[(p * g.out_h + oy) * g.out_w + ox] / pooling::avg_pool_area<T>(g, oy, ox);
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
  SPARQ_CHECK(c.in_h * c.in_w <= INT32_MAX, "{}: a {}x{} plane does not fit the int32 argmax",
              name_, c.in_h, c.in_w);
  const PoolGeom g = geom(c.max_batch);
  argmax_ = Buffer::host(g.planes * g.out_h * g.out_w * sizeof(std::int32_t));
}

std::int32_t* MaxPool2d::argmax_cache() {
  if (argmax_.device() != device()) {
    const std::size_t bytes = argmax_.size();
    argmax_ = Buffer();  // release the old one first: only one cache is ever held
    argmax_ = on_cuda() ? Buffer::device(bytes) : Buffer::host(bytes);
  }
  return argmax_.as<std::int32_t>();
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
  SPARQ_PROFILE_SCOPE("max_pool.forward");  // Note [Profile scopes]
  SPARQ_CHECK(x.ndim() == 4, "{}: x must be NCHW, got {}", name_, x.shape().str());
  const std::int64_t n = x.dim(0);
  check_arg(x, {n, config_.channels, config_.in_h, config_.in_w}, name_, "x", DType::kF32,
            device());
  SPARQ_CHECK(n <= config_.max_batch, "{}: batch {} exceeds the cache's max_batch {}", name_, n,
              config_.max_batch);
  check_arg(y, output_shape(n), name_, "y", DType::kF32, device());
  batch_ = n;
  std::int32_t* argmax = argmax_cache();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::max_pool_forward(geom(n), x.data<float>(), y.data<float>(), argmax, stream());
#endif
  } else {
    cpu::max_pool_forward<float>(geom(n), x.data<float>(), y.data<float>(), argmax);
  }
}

void MaxPool2d::backward(const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("max_pool.backward");  // Note [Profile scopes]
  SPARQ_CHECK(batch_ > 0 && argmax_.device() == device(), "{}: backward() before forward()",
              name_);
  check_arg(dy, output_shape(batch_), name_, "dy (batch of the last forward)", DType::kF32,
            device());
  check_arg(dx, {batch_, config_.channels, config_.in_h, config_.in_w}, name_, "dx", DType::kF32,
            device());
  const std::int32_t* argmax = argmax_.as<std::int32_t>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::max_pool_backward(geom(batch_), argmax, dy.data<float>(), dx.data<float>(), stream());
#endif
  } else {
    cpu::max_pool_backward<float>(geom(batch_), argmax, dy.data<float>(), dx.data<float>());
  }
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
  SPARQ_PROFILE_SCOPE("avg_pool.forward");  // Note [Profile scopes]
  check_arg(x, x.shape(), name_, "x", DType::kF32, device());
  check_arg(y, y.shape(), name_, "y", DType::kF32, device());
  const PoolGeom g = geom(x.shape(), y.shape(), "x", "y");
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::avg_pool_forward(g, x.data<float>(), y.data<float>(), stream());
#endif
  } else {
    cpu::avg_pool_forward<float>(g, x.data<float>(), y.data<float>());
  }
}

void AdaptiveAvgPool2d::backward(const Tensor& dy, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("avg_pool.backward");  // Note [Profile scopes]
  check_arg(dy, dy.shape(), name_, "dy", DType::kF32, device());
  check_arg(dx, dx.shape(), name_, "dx", DType::kF32, device());
  const PoolGeom g = geom(dx.shape(), dy.shape(), "dx", "dy");
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::avg_pool_backward(g, dy.data<float>(), dx.data<float>(), stream());
#endif
  } else {
    cpu::avg_pool_backward<float>(g, dy.data<float>(), dx.data<float>());
  }
}

Tensor flatten(const Tensor& x) {
  SPARQ_CHECK(x.ndim() >= 1, "flatten: needs at least one dimension, got {}", x.shape().str());
  const std::int64_t n = x.dim(0);
  return x.reshape({n, n == 0 ? 0 : x.numel() / n});
}

}  // namespace sparq
