// The pooling geometry and the per-cell / per-pixel math that the CPU (layers/pooling.cpp) and
// the CUDA kernels (layers/cuda/pooling.cu) share, written once as SPARQ_HOST_DEVICE so that
// both sides scan windows, break ties and sum in the same order, and the CPU tests cover the
// device's arithmetic (Note [Layer dispatch], layers/param_set.h). Free of fmt: nvcc compiles it.
//
// Why the device gives the CPU's bits exactly:
//   * max pooling scans a window row by row, left to right, and keeps the FIRST maximum
//     (a strictly greater value replaces it; the first NaN wins, so it propagates): a tie goes to
//     the earliest cell in scan order on both sides, because both run max_pool_cell();
//   * the CPU backward scatters dy[o] into dx[argmax[o]] for o = 0, 1, ... in order; the
//     device gathers instead (one thread per input pixel, no atomics) and adds the dy of the
//     windows that cover the pixel in the same increasing o, so every pixel sees the same
//     additions in the same order (max_pool_dx_at, avg_pool_dx_at);
//   * average pooling sums a window row by row and divides by the window's area: the same
//     IEEE operations in the same order on both sides (nvcc's default -prec-div=true).
#pragma once

#include <cstdint>
#include <limits>

#include "core/host_device.h"

namespace sparq {

struct PoolGeom {
  std::int64_t planes = 0, h = 0, w = 0;  // planes = N * C
  std::int64_t out_h = 0, out_w = 0;
  std::int64_t kernel = 1, stride = 1, padding = 0;  // max pooling only
};

namespace pooling {

// The max of window (oy, ox) of one plane, into *best, and its index in the plane (the first
// maximum in scan order). Padded cells never win; at least one cell of every window is inside
// the plane (MaxPool2d checks padding <= kernel / 2).
template <typename T>
SPARQ_HOST_DEVICE inline std::int32_t max_pool_cell(const PoolGeom& g, const T* plane,
                                                    std::int64_t oy, std::int64_t ox, T* best) {
  T value = -std::numeric_limits<T>::infinity();
  std::int32_t at = -1;
  for (std::int64_t i = 0; i < g.kernel; ++i) {
    const std::int64_t iy = oy * g.stride - g.padding + i;
    if (iy < 0 || iy >= g.h) continue;
    for (std::int64_t j = 0; j < g.kernel; ++j) {
      const std::int64_t ix = ox * g.stride - g.padding + j;
      if (ix < 0 || ix >= g.w) continue;
      const T v = plane[iy * g.w + ix];
      const auto index = static_cast<std::int32_t>(iy * g.w + ix);
      // A NaN wins, as in PyTorch, so it propagates instead of vanishing; the first one in scan
      // order ends the scan (PyTorch's CPU kernel keeps the last one instead).
      if (v != v) {
        *best = v;
        return index;
      }
      if (at < 0 || v > value) {
        value = v;
        at = index;
      }
    }
  }
  *best = value;
  return at;
}

// Output rows (or columns) [*lo, *hi) whose max-pool window covers input row i: the windows
// start at o * stride - padding and span `kernel` cells.
SPARQ_HOST_DEVICE inline void max_pool_covering(std::int64_t i, std::int64_t kernel,
                                                std::int64_t stride, std::int64_t padding,
                                                std::int64_t out, std::int64_t* lo,
                                                std::int64_t* hi) {
  const std::int64_t first = i + padding - kernel + 1;  // o * stride >= first
  std::int64_t begin = first <= 0 ? 0 : (first + stride - 1) / stride;
  std::int64_t end = (i + padding) / stride + 1;  // o * stride <= i + padding
  if (end > out) end = out;
  if (begin > end) begin = end;
  *lo = begin;
  *hi = end;
}

// dx at input pixel (iy, ix) of one plane: the dy of every window whose argmax is this pixel,
// added in increasing output index, exactly as the CPU's scatter does.
template <typename T>
SPARQ_HOST_DEVICE inline T max_pool_dx_at(const PoolGeom& g, const std::int32_t* argmax_plane,
                                          const T* dy_plane, std::int64_t iy, std::int64_t ix) {
  std::int64_t y0, y1, x0, x1;
  max_pool_covering(iy, g.kernel, g.stride, g.padding, g.out_h, &y0, &y1);
  max_pool_covering(ix, g.kernel, g.stride, g.padding, g.out_w, &x0, &x1);
  const std::int32_t self = static_cast<std::int32_t>(iy * g.w + ix);
  T acc = T(0);
  for (std::int64_t oy = y0; oy < y1; ++oy) {
    for (std::int64_t ox = x0; ox < x1; ++ox) {
      const std::int64_t o = oy * g.out_w + ox;
      if (argmax_plane[o] == self) acc += dy_plane[o];
    }
  }
  return acc;
}

// Adaptive pooling window of output cell i along one axis: [floor(i*in/out), ceil((i+1)*in/out)).
SPARQ_HOST_DEVICE inline std::int64_t adaptive_begin(std::int64_t i, std::int64_t in,
                                                     std::int64_t out) {
  return i * in / out;
}
SPARQ_HOST_DEVICE inline std::int64_t adaptive_end(std::int64_t i, std::int64_t in,
                                                   std::int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// The number of cells averaged by output (oy, ox), as the divisor's type.
template <typename T>
SPARQ_HOST_DEVICE inline T avg_pool_area(const PoolGeom& g, std::int64_t oy, std::int64_t ox) {
  const std::int64_t rows = adaptive_end(oy, g.h, g.out_h) - adaptive_begin(oy, g.h, g.out_h);
  const std::int64_t cols = adaptive_end(ox, g.w, g.out_w) - adaptive_begin(ox, g.w, g.out_w);
  return static_cast<T>(rows * cols);
}

// The average of output cell (oy, ox) of one plane: the window summed row by row.
template <typename T>
SPARQ_HOST_DEVICE inline T avg_pool_cell(const PoolGeom& g, const T* plane, std::int64_t oy,
                                         std::int64_t ox) {
  const std::int64_t y0 = adaptive_begin(oy, g.h, g.out_h), y1 = adaptive_end(oy, g.h, g.out_h);
  const std::int64_t x0 = adaptive_begin(ox, g.w, g.out_w), x1 = adaptive_end(ox, g.w, g.out_w);
  T acc = T(0);
  for (std::int64_t iy = y0; iy < y1; ++iy) {
    for (std::int64_t ix = x0; ix < x1; ++ix) acc += plane[iy * g.w + ix];
  }
  return acc / avg_pool_area<T>(g, oy, ox);
}

// dx at input pixel (iy, ix) of one plane: each covering window's share dy / area, added in
// increasing output index as the CPU's scatter does. Windows are contiguous ranges whose ends
// grow with the index, so the scan stops at the first window that starts past the pixel.
template <typename T>
SPARQ_HOST_DEVICE inline T avg_pool_dx_at(const PoolGeom& g, const T* dy_plane, std::int64_t iy,
                                          std::int64_t ix) {
  T acc = T(0);
  for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
    if (adaptive_begin(oy, g.h, g.out_h) > iy) break;
    if (adaptive_end(oy, g.h, g.out_h) <= iy) continue;
    for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
      if (adaptive_begin(ox, g.w, g.out_w) > ix) break;
      if (adaptive_end(ox, g.w, g.out_w) <= ix) continue;
      acc += dy_plane[oy * g.out_w + ox] / avg_pool_area<T>(g, oy, ox);
    }
  }
  return acc;
}

}  // namespace pooling
}  // namespace sparq
