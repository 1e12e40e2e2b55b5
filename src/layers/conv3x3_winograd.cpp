#include "layers/conv3x3_winograd.h"

#include <algorithm>

#include "core/check.h"
#include "core/profile.h"
#include "layers/conv3x3_winograd_tiles.h"
#include "layers/matmul.h"

namespace sparq::cpu {
namespace {

// Widest image row: the transforms keep a few padded rows on the stack.
constexpr std::int64_t kMaxWidth = 512;
// Tiles a chunk aims for: long enough GEMMs (N = tiles), small enough to stay in cache.
constexpr std::int64_t kChunkTiles = 512;
// Cap on a chunk's transformed input + product (elements), for the many-channel layers.
constexpr std::int64_t kChunkElems = std::int64_t{2} << 20;
// Fewer input channels make the GEMMs too shallow to pay for the transforms: VGG's first
// layer (3 -> 64 channels) took 12 ms per step this way against 7 ms with im2col (1 thread).
constexpr std::int64_t kMinChannels = 16;
// The planes of a transformed matrix lie this many floats further apart than their size:
// sizes are often powers of two, and 16 streams exactly 2^n bytes apart (VGG: 1 MB for U at
// 512 channels) map to the same cache sets.
constexpr std::int64_t kPlanePad = 16;
constexpr std::int64_t plane_stride(std::int64_t elems) { return elems + kPlanePad; }

template <class W>
constexpr std::int64_t kPlanes = std::int64_t{W::a} * W::a;  // transformed positions xi per tile

template <class W>
struct Tiling {
  std::int64_t th, tw, per_image;
  explicit Tiling(const Conv2dGeom& g)
      : th((g.h + W::m - 1) / W::m), tw((g.w + W::m - 1) / W::m), per_image(th * tw) {}
};

template <class W>
std::int64_t chunk_images(const Conv2dGeom& g) {
  const std::int64_t tiles =
      std::min(kChunkTiles, std::max<std::int64_t>(kChunkElems / (kPlanes<W> * (g.c + g.k)), 1));
  return std::max<std::int64_t>(tiles / Tiling<W>(g).per_image, 1);
}

template <class W>
std::int64_t workspace_elems(const Conv2dGeom& g) {
  const std::int64_t tiles = chunk_images<W>(g) * Tiling<W>(g).per_image;
  return kPlanes<W> *
         (plane_stride(g.k * g.c) + plane_stride(g.c * tiles) + plane_stride(g.k * tiles));
}

// U[xi][k][c] = (G w[k][c] G^T)[xi]; with `flip`, of w[k][c] turned by 180 degrees (the
// kernel of the input gradient).
template <class W, typename T>
void transform_weights(const Conv2dGeom& g, const T* w, bool flip, T* u) {
  constexpr int a = W::a;
  const std::int64_t kc = g.k * g.c, us = plane_stride(kc);
#pragma omp parallel for schedule(static) if (kc > 1024)
  for (std::int64_t p = 0; p < kc; ++p) {
    T f[9];
    for (int i = 0; i < 9; ++i) f[i] = w[p * 9 + (flip ? 8 - i : i)];
    T t[a][3], col[3], out[a];
    for (int j = 0; j < 3; ++j) {
      col[0] = f[j], col[1] = f[3 + j], col[2] = f[6 + j];
      W::weights(col, out);
      for (int i = 0; i < a; ++i) t[i][j] = out[i];
    }
    for (int i = 0; i < a; ++i) {
      W::weights(t[i], out);
      for (int j = 0; j < a; ++j) u[(i * a + j) * us + p] = out[j];
    }
  }
}

// dW[k][c] += G^T dU[k][c] G, the adjoint of transform_weights (unflipped).
template <class W, typename T>
void fold_weight_gradient(const Conv2dGeom& g, const T* du, T* dw) {
  constexpr int a = W::a;
  const std::int64_t kc = g.k * g.c, us = plane_stride(kc);
#pragma omp parallel for schedule(static) if (kc > 1024)
  for (std::int64_t p = 0; p < kc; ++p) {
    T t[3][a], col[a], out[3];
    for (int b = 0; b < a; ++b) {
      for (int i = 0; i < a; ++i) col[i] = du[(i * a + b) * us + p];
      W::weights_adjoint(col, out);
      for (int i = 0; i < 3; ++i) t[i][b] = out[i];
    }
    T* f = dw + p * 9;
    for (int i = 0; i < 3; ++i) {
      W::weights_adjoint(t[i], out);
      for (int j = 0; j < 3; ++j) f[i * 3 + j] += out[j];
    }
  }
}

// V[xi][c][t] = (B^T d_t B)[xi] for the nb images at src (ch channels of h x w each), tile t
// of the chunk = (image, ty, tx) in order, ld = nb * tiles per image. Per row of tiles: the
// a padded input rows (column q holds x[q - 1], zero outside), B^T down the columns for the
// whole row at once, then B^T along each tile's a columns.
// Note [Plane order]
// ~~~~~~~~~~~~~~~~~~~
// The activation transforms loop over (channel, image) planes with the image fastest. A
// plane's tiles lie at channel * ld + image * tiles_per_image in each of the a^2 transformed
// planes, so consecutive iterations write (or read) neighbouring tiles there. With the
// channel fastest they were ld floats apart: on VGG's small maps (one tile per image at 4x4)
// every value touched a cache line of its own in each of 36 planes, and the lines left the
// cache before the other images filled them. Every plane is computed alone, so the order
// changes no result.
template <class W, typename T>
void transform_input(const Conv2dGeom& g, std::int64_t ch, const T* src, std::int64_t nb, T* v) {
  constexpr int a = W::a, m = W::m;
  const Tiling<W> tl(g);
  const std::int64_t ld = nb * tl.per_image, width = m * tl.tw + 2;
  const std::int64_t xs = plane_stride(ch * ld);  // distance between xi planes
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < nb * ch; ++p) {
    const std::int64_t c = p / nb, img = p % nb;  // Note [Plane order]
    const T* plane = src + (img * ch + c) * g.h * g.w;
    T* out = v + c * ld + img * tl.per_image;
    T rows[a][kMaxWidth + 8], vt[a][kMaxWidth + 8];
    for (std::int64_t ty = 0; ty < tl.th; ++ty) {
      for (int r = 0; r < a; ++r) {
        const std::int64_t iy = m * ty - 1 + r;
        std::fill(rows[r], rows[r] + width, T(0));
        if (iy >= 0 && iy < g.h) std::copy(plane + iy * g.w, plane + (iy + 1) * g.w, rows[r] + 1);
      }
      for (std::int64_t q = 0; q < width; ++q) {
        T d[a], e[a];
        for (int r = 0; r < a; ++r) d[r] = rows[r][q];
        W::input(d, e);
        for (int i = 0; i < a; ++i) vt[i][q] = e[i];
      }
      T* o = out + ty * tl.tw;
      for (int i = 0; i < a; ++i) {
        T* oi = o + (a * i) * xs;
        for (std::int64_t tx = 0; tx < tl.tw; ++tx) {
          T e[a];
          W::input(vt[i] + m * tx, e);
          for (int j = 0; j < a; ++j) oi[j * xs + tx] = e[j];
        }
      }
    }
  }
}

// dM[xi][k][t] = (A dY_t A^T)[xi], the adjoint of transform_output (dY zero outside the
// image).
template <class W, typename T>
void transform_output_adjoint(const Conv2dGeom& g, const T* dy, std::int64_t nb, T* dm) {
  constexpr int a = W::a, m = W::m;
  const Tiling<W> tl(g);
  const std::int64_t ld = nb * tl.per_image, width = m * tl.tw, hw = g.h * g.w;
  const std::int64_t xs = plane_stride(g.k * ld);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < nb * g.k; ++p) {
    const std::int64_t k = p / nb, img = p % nb;  // Note [Plane order]
    const T* plane = dy + (img * g.k + k) * hw;
    T* out = dm + k * ld + img * tl.per_image;
    T rows[m][kMaxWidth + 8], e[a][kMaxWidth + 8];
    for (std::int64_t ty = 0; ty < tl.th; ++ty) {
      for (int r = 0; r < m; ++r) {
        const std::int64_t oy = m * ty + r;
        std::fill(rows[r], rows[r] + width, T(0));
        if (oy < g.h) std::copy(plane + oy * g.w, plane + (oy + 1) * g.w, rows[r]);
      }
      for (std::int64_t q = 0; q < width; ++q) {
        T d[m], f[a];
        for (int r = 0; r < m; ++r) d[r] = rows[r][q];
        W::output_adjoint(d, f);
        for (int i = 0; i < a; ++i) e[i][q] = f[i];
      }
      T* o = out + ty * tl.tw;
      for (int i = 0; i < a; ++i) {
        T* oi = o + (a * i) * xs;
        for (std::int64_t tx = 0; tx < tl.tw; ++tx) {
          T f[a];
          W::output_adjoint(e[i] + m * tx, f);
          for (int j = 0; j < a; ++j) oi[j * xs + tx] = f[j];
        }
      }
    }
  }
}

// y_t = A^T M_t A (+ bias) for ch output channels, written into the nb images at dst (a tile
// past the image's edge keeps only its in-image part).
template <class W, typename T>
void transform_output(const Conv2dGeom& g, std::int64_t ch, const T* mt, std::int64_t nb,
                      const T* bias, T* dst) {
  constexpr int a = W::a, m = W::m;
  const Tiling<W> tl(g);
  const std::int64_t ld = nb * tl.per_image, hw = g.h * g.w, xs = plane_stride(ch * ld);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < nb * ch; ++p) {
    const std::int64_t k = p / nb, img = p % nb;  // Note [Plane order]
    const T* in = mt + k * ld + img * tl.per_image;
    T* plane = dst + (img * ch + k) * hw;
    const T b0 = bias != nullptr ? bias[k] : T(0);
    T out[m][kMaxWidth + 8];
    for (std::int64_t ty = 0; ty < tl.th; ++ty) {
      const T* s = in + ty * tl.tw;
      for (std::int64_t tx = 0; tx < tl.tw; ++tx) {
        T r[m][a], col[a], y[m];
        for (int j = 0; j < a; ++j) {
          for (int i = 0; i < a; ++i) col[i] = s[(i * a + j) * xs + tx];
          W::output(col, y);
          for (int i = 0; i < m; ++i) r[i][j] = y[i];
        }
        for (int i = 0; i < m; ++i) {
          W::output(r[i], y);
          for (int j = 0; j < m; ++j) out[i][m * tx + j] = y[j] + b0;
        }
      }
      for (int r = 0; r < m && m * ty + r < g.h; ++r) {
        std::copy(out[r], out[r] + g.w, plane + (m * ty + r) * g.w);
      }
    }
  }
}

template <class W, typename T>
void forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* work) {
  constexpr std::int64_t planes = kPlanes<W>;
  const Tiling<W> tl(g);
  const std::int64_t chunk = chunk_images<W>(g), us = plane_stride(g.k * g.c);
  T* u = work;
  {
    SPARQ_PROFILE_SCOPE("winograd.transform_weights");
    transform_weights<W>(g, w, false, u);
  }
  for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const std::int64_t nb = std::min(chunk, g.n - n0), tiles = nb * tl.per_image;
    const std::int64_t vs = plane_stride(g.c * tiles), ms = plane_stride(g.k * tiles);
    T* v = u + planes * us;
    T* m = v + planes * vs;
    {
      SPARQ_PROFILE_SCOPE("winograd.transform_input");
      transform_input<W>(g, g.c, x + n0 * g.c * g.h * g.w, nb, v);
    }
#pragma omp parallel for schedule(static)
    for (std::int64_t xi = 0; xi < planes; ++xi) {
      matmul<T>(GemmShape{false, false, g.k, tiles, g.c}, T(1), u + xi * us, v + xi * vs, T(0),
                m + xi * ms);
    }
    {
      SPARQ_PROFILE_SCOPE("winograd.transform_output");
      transform_output<W>(g, g.k, m, nb, b, y + n0 * g.k * g.h * g.w);
    }
  }
}

template <class W, typename T>
void backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw, T* work) {
  constexpr std::int64_t planes = kPlanes<W>;
  const Tiling<W> tl(g);
  const std::int64_t chunk = chunk_images<W>(g), us = plane_stride(g.k * g.c);
  const std::int64_t hw = g.h * g.w;
  T* u = work;  // U of the flipped kernel for the input gradient, then dU for the weights'
  T* v = u + planes * us;
  if (dx != nullptr) {
    // dX = conv(dY, the flipped kernel with C and K swapped): U_flip(xi)^T is the [C, K] factor.
    {
      SPARQ_PROFILE_SCOPE("winograd.transform_weights");
      transform_weights<W>(g, w, true, u);
    }
    for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      const std::int64_t nb = std::min(chunk, g.n - n0), tiles = nb * tl.per_image;
      const std::int64_t vs = plane_stride(g.k * tiles), ms = plane_stride(g.c * tiles);
      T* m = v + planes * vs;
      {
        SPARQ_PROFILE_SCOPE("winograd.transform_input");
        transform_input<W>(g, g.k, dy + n0 * g.k * hw, nb, v);
      }
#pragma omp parallel for schedule(static)
      for (std::int64_t xi = 0; xi < planes; ++xi) {
        matmul<T>(GemmShape{true, false, g.c, tiles, g.k}, T(1), u + xi * us, v + xi * vs, T(0),
                  m + xi * ms);
      }
      {
        SPARQ_PROFILE_SCOPE("winograd.transform_output");
        transform_output<W>(g, g.c, m, nb, static_cast<const T*>(nullptr), dx + n0 * g.c * hw);
      }
    }
  }
  if (dw != nullptr) {
    for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      const std::int64_t nb = std::min(chunk, g.n - n0), tiles = nb * tl.per_image;
      const std::int64_t vs = plane_stride(g.c * tiles), ms = plane_stride(g.k * tiles);
      T* dm = v + planes * vs;
      {
        SPARQ_PROFILE_SCOPE("winograd.transform_input");
        transform_input<W>(g, g.c, x + n0 * g.c * hw, nb, v);
      }
      {
        SPARQ_PROFILE_SCOPE("winograd.transform_output");
        transform_output_adjoint<W>(g, dy + n0 * g.k * hw, nb, dm);
      }
      // Each xi's sum runs over the chunks in image order, whatever thread computes it.
#pragma omp parallel for schedule(static)
      for (std::int64_t xi = 0; xi < planes; ++xi) {
        matmul<T>(GemmShape{false, true, g.k, g.c, tiles}, T(1), dm + xi * ms, v + xi * vs,
                  n0 == 0 ? T(0) : T(1), u + xi * us);
      }
    }
    if (g.n > 0) {
      SPARQ_PROFILE_SCOPE("winograd.transform_weights");
      fold_weight_gradient<W>(g, u, dw);
    }
  }
}

}  // namespace

bool winograd3x3_applies(const Conv2dGeom& g) {
  return g.c >= kMinChannels && g.r == 3 && g.s == 3 && g.stride_h == 1 && g.stride_w == 1 &&
         g.pad_h == 1 && g.pad_w == 1 && g.dil_h == 1 && g.dil_w == 1 && g.w <= kMaxWidth;
}

// The tile with fewer elementwise products per image (the GEMMs' work), F(2x2) on a tie: the
// 4x4 tile's transforms cost more per tile, and its U has 36 planes of K x C against 16.
// VGG-16 at 32x32: F(4x4) down to the 4x4 maps, F(2x2) on the 2x2 maps, where a 4x4 tile
// would be mostly padding (measured: docs/models.md).
int winograd3x3_tile(const Conv2dGeom& g) {
  const Tiling<winograd::F4> f4(g);
  const Tiling<winograd::F2> f2(g);
  return f4.per_image * kPlanes<winograd::F4> < f2.per_image * kPlanes<winograd::F2> ? 4 : 2;
}

namespace {
int checked_tile(const Conv2dGeom& g, int tile) {
  if (tile == 0) return winograd3x3_tile(g);
  SPARQ_CHECK(tile == 2 || tile == 4, "Winograd tile must be 0 (auto), 2 or 4, got {}", tile);
  return tile;
}
}  // namespace

std::int64_t winograd3x3_chunk_images(const Conv2dGeom& g, int tile) {
  return checked_tile(g, tile) == 4 ? chunk_images<winograd::F4>(g) : chunk_images<winograd::F2>(g);
}

std::int64_t winograd3x3_workspace_elems(const Conv2dGeom& g, int tile) {
  return checked_tile(g, tile) == 4 ? workspace_elems<winograd::F4>(g)
                                    : workspace_elems<winograd::F2>(g);
}

template <typename T>
void winograd3x3_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* work,
                         int tile) {
  if (checked_tile(g, tile) == 4) {
    forward<winograd::F4>(g, x, w, b, y, work);
  } else {
    forward<winograd::F2>(g, x, w, b, y, work);
  }
}

template <typename T>
void winograd3x3_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw,
                          T* db, T* work, int tile) {
  if (checked_tile(g, tile) == 4) {
    backward<winograd::F4>(g, x, w, dy, dx, dw, work);
  } else {
    backward<winograd::F2>(g, x, w, dy, dx, dw, work);
  }
  if (db != nullptr) conv2d_bias_backward(g, dy, db);
}

template void winograd3x3_forward<float>(const Conv2dGeom&, const float*, const float*,
                                         const float*, float*, float*, int);
template void winograd3x3_forward<double>(const Conv2dGeom&, const double*, const double*,
                                          const double*, double*, double*, int);
template void winograd3x3_backward<float>(const Conv2dGeom&, const float*, const float*,
                                          const float*, float*, float*, float*, float*, int);
template void winograd3x3_backward<double>(const Conv2dGeom&, const double*, const double*,
                                           const double*, double*, double*, double*, double*, int);

}  // namespace sparq::cpu
