#include "layers/conv3x3_winograd.h"

#include <algorithm>

#include "core/profile.h"
#include "layers/matmul.h"

namespace sparq::cpu {
namespace {

constexpr std::int64_t kXi = 16;  // transformed positions per tile (4x4)
// Widest row of tiles: the transforms keep a few padded rows on the stack.
constexpr std::int64_t kMaxTileCols = 256;
// Tiles a chunk aims for: long enough GEMMs (N = tiles), small enough to stay in cache.
constexpr std::int64_t kChunkTiles = 512;
// Cap on a chunk's transformed input + product (elements), for the many-channel layers.
constexpr std::int64_t kChunkElems = std::int64_t{2} << 20;
// Fewer input channels make the GEMMs too shallow to pay for the transforms: VGG's first
// layer (3 -> 64 channels) took 12 ms per step this way against 7 ms with im2col (1 thread).
constexpr std::int64_t kMinChannels = 16;
// The 16 planes of a transformed matrix lie this many floats further apart than their size:
// sizes are often powers of two, and 16 streams exactly 2^n bytes apart (VGG: 1 MB for U at
// 512 channels) map to the same cache sets.
constexpr std::int64_t kPlanePad = 16;
constexpr std::int64_t plane_stride(std::int64_t elems) { return elems + kPlanePad; }

struct Tiling {
  std::int64_t th, tw, per_image;
  explicit Tiling(const Conv2dGeom& g)
      : th((g.h + 1) / 2), tw((g.w + 1) / 2), per_image(th * tw) {}
};

// Flipping the kernel in both axes maps transformed position (i, j) to (3-i, 3-j) for the
// outer rows/columns: G * J = P * G with P swapping rows 0 and 3 of G.
constexpr std::int64_t flip_xi(std::int64_t xi) {
  auto f = [](std::int64_t i) { return i == 0 ? 3 : i == 3 ? 0 : i; };
  return f(xi / 4) * 4 + f(xi % 4);
}

// U[xi][k][c] = (G w[k][c] G^T)[xi], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
template <typename T>
void transform_weights(const Conv2dGeom& g, const T* w, T* u) {
  const std::int64_t kc = g.k * g.c, us = plane_stride(kc);
  const T half(0.5);
#pragma omp parallel for schedule(static) if (kc > 1024)
  for (std::int64_t p = 0; p < kc; ++p) {
    const T* f = w + p * 9;
    T t[4][3];
    for (int j = 0; j < 3; ++j) {
      t[0][j] = f[j];
      t[1][j] = half * (f[j] + f[3 + j] + f[6 + j]);
      t[2][j] = half * (f[j] - f[3 + j] + f[6 + j]);
      t[3][j] = f[6 + j];
    }
    for (int i = 0; i < 4; ++i) {
      u[(i * 4 + 0) * us + p] = t[i][0];
      u[(i * 4 + 1) * us + p] = half * (t[i][0] + t[i][1] + t[i][2]);
      u[(i * 4 + 2) * us + p] = half * (t[i][0] - t[i][1] + t[i][2]);
      u[(i * 4 + 3) * us + p] = t[i][2];
    }
  }
}

// dW[k][c] += G^T dU[k][c] G, the adjoint of transform_weights.
template <typename T>
void fold_weight_gradient(const Conv2dGeom& g, const T* du, T* dw) {
  const std::int64_t kc = g.k * g.c, us = plane_stride(kc);
  const T half(0.5);
#pragma omp parallel for schedule(static) if (kc > 1024)
  for (std::int64_t p = 0; p < kc; ++p) {
    T t[3][4];
    for (int b = 0; b < 4; ++b) {
      const T u0 = du[(0 + b) * us + p], u1 = du[(4 + b) * us + p], u2 = du[(8 + b) * us + p],
              u3 = du[(12 + b) * us + p];
      t[0][b] = u0 + half * (u1 + u2);
      t[1][b] = half * (u1 - u2);
      t[2][b] = half * (u1 + u2) + u3;
    }
    T* f = dw + p * 9;
    for (int i = 0; i < 3; ++i) {
      f[i * 3 + 0] += t[i][0] + half * (t[i][1] + t[i][2]);
      f[i * 3 + 1] += half * (t[i][1] - t[i][2]);
      f[i * 3 + 2] += half * (t[i][1] + t[i][2]) + t[i][3];
    }
  }
}

// V[xi][c][t] = (B^T d_t B)[xi] for the nb images at src (ch channels of h x w each), tile t
// of the chunk = (image, ty, tx) in order, ld = nb * tiles per image.
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <typename T>
void transform_input(const Conv2dGeom& g, std::int64_t ch, const T* src, std::int64_t nb, T* v) {
  const Tiling tl(g);
  const std::int64_t ld = nb * tl.per_image, width = 2 * tl.tw + 2;
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < nb * ch; ++p) {
    const std::int64_t img = p / ch, c = p % ch;
    const T* plane = src + p * g.h * g.w;
    T* out = v + c * ld + img * tl.per_image;
    // Padded rows (column q holds x[q - 1], zero outside), then B^T across the 4 rows.
    T rows[4][2 * kMaxTileCols + 2], vt[4][2 * kMaxTileCols + 2];
    for (std::int64_t ty = 0; ty < tl.th; ++ty) {
      for (int r = 0; r < 4; ++r) {
        const std::int64_t iy = 2 * ty - 1 + r;
        std::fill(rows[r], rows[r] + width, T(0));
        if (iy >= 0 && iy < g.h) std::copy(plane + iy * g.w, plane + (iy + 1) * g.w, rows[r] + 1);
      }
      for (std::int64_t q = 0; q < width; ++q) {
        vt[0][q] = rows[0][q] - rows[2][q];
        vt[1][q] = rows[1][q] + rows[2][q];
        vt[2][q] = rows[2][q] - rows[1][q];
        vt[3][q] = rows[1][q] - rows[3][q];
      }
      T* o = out + ty * tl.tw;
      const std::int64_t xs = plane_stride(ch * ld);  // distance between xi planes
      for (int i = 0; i < 4; ++i) {
        const T* s = vt[i];
        T* o0 = o + (4 * i) * xs;
        for (std::int64_t tx = 0; tx < tl.tw; ++tx) {
          const T a = s[2 * tx], b = s[2 * tx + 1], c2 = s[2 * tx + 2], d = s[2 * tx + 3];
          o0[tx] = a - c2;
          o0[xs + tx] = b + c2;
          o0[2 * xs + tx] = c2 - b;
          o0[3 * xs + tx] = b - d;
        }
      }
    }
  }
}

// dM[xi][k][t] = (A dY_t A^T)[xi], the adjoint of transform_output (dY zero outside the
// image). A = [1 0; 1 1; 1 -1; 0 -1].
template <typename T>
void transform_output_adjoint(const Conv2dGeom& g, const T* dy, std::int64_t nb, T* dm) {
  const Tiling tl(g);
  const std::int64_t ld = nb * tl.per_image, width = 2 * tl.tw, hw = g.h * g.w;
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < nb * g.k; ++p) {
    const std::int64_t img = p / g.k, k = p % g.k;
    const T* plane = dy + p * hw;
    T* out = dm + k * ld + img * tl.per_image;
    T rows[2][2 * kMaxTileCols], e[4][2 * kMaxTileCols];
    for (std::int64_t ty = 0; ty < tl.th; ++ty) {
      for (int r = 0; r < 2; ++r) {
        const std::int64_t oy = 2 * ty + r;
        std::fill(rows[r], rows[r] + width, T(0));
        if (oy < g.h) std::copy(plane + oy * g.w, plane + (oy + 1) * g.w, rows[r]);
      }
      for (std::int64_t q = 0; q < width; ++q) {
        e[0][q] = rows[0][q];
        e[1][q] = rows[0][q] + rows[1][q];
        e[2][q] = rows[0][q] - rows[1][q];
        e[3][q] = -rows[1][q];
      }
      T* o = out + ty * tl.tw;
      const std::int64_t xs = plane_stride(g.k * ld);
      for (int i = 0; i < 4; ++i) {
        const T* s = e[i];
        T* o0 = o + (4 * i) * xs;
        for (std::int64_t tx = 0; tx < tl.tw; ++tx) {
          const T a = s[2 * tx], b = s[2 * tx + 1];
          o0[tx] = a;
          o0[xs + tx] = a + b;
          o0[2 * xs + tx] = a - b;
          o0[3 * xs + tx] = -b;
        }
      }
    }
  }
}

// y_t = A^T M_t A (+ bias) for ch output channels, written into the nb images at dst (a 2x2
// tile past the image's edge keeps only its in-image part). A^T = [1 1 1 0; 0 1 -1 -1].
template <typename T>
void transform_output(const Conv2dGeom& g, std::int64_t ch, const T* m, std::int64_t nb,
                      const T* bias, T* dst) {
  const Tiling tl(g);
  const std::int64_t ld = nb * tl.per_image, hw = g.h * g.w, xs = plane_stride(ch * ld);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < nb * ch; ++p) {
    const std::int64_t img = p / ch, k = p % ch;
    const T* in = m + k * ld + img * tl.per_image;
    T* plane = dst + p * hw;
    const T b0 = bias != nullptr ? bias[k] : T(0);
    T out[2][2 * kMaxTileCols];
    for (std::int64_t ty = 0; ty < tl.th; ++ty) {
      const T* s = in + ty * tl.tw;
      for (std::int64_t tx = 0; tx < tl.tw; ++tx) {
        T r0[4], r1[4];
        for (int j = 0; j < 4; ++j) {
          const T m0 = s[j * xs + tx], m1 = s[(4 + j) * xs + tx], m2 = s[(8 + j) * xs + tx],
                  m3 = s[(12 + j) * xs + tx];
          r0[j] = m0 + m1 + m2;
          r1[j] = m1 - m2 - m3;
        }
        out[0][2 * tx] = r0[0] + r0[1] + r0[2] + b0;
        out[0][2 * tx + 1] = r0[1] - r0[2] - r0[3] + b0;
        out[1][2 * tx] = r1[0] + r1[1] + r1[2] + b0;
        out[1][2 * tx + 1] = r1[1] - r1[2] - r1[3] + b0;
      }
      for (int r = 0; r < 2 && 2 * ty + r < g.h; ++r) {
        std::copy(out[r], out[r] + g.w, plane + (2 * ty + r) * g.w);
      }
    }
  }
}

}  // namespace

bool winograd3x3_applies(const Conv2dGeom& g) {
  return g.c >= kMinChannels && g.r == 3 && g.s == 3 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 1 &&
         g.pad_w == 1 && g.dil_h == 1 && g.dil_w == 1 && (g.w + 1) / 2 <= kMaxTileCols;
}

std::int64_t winograd3x3_chunk_images(const Conv2dGeom& g) {
  const std::int64_t tiles =
      std::min(kChunkTiles, std::max<std::int64_t>(kChunkElems / (kXi * (g.c + g.k)), 1));
  return std::max<std::int64_t>(tiles / Tiling(g).per_image, 1);
}

std::int64_t winograd3x3_workspace_elems(const Conv2dGeom& g) {
  const std::int64_t tiles = winograd3x3_chunk_images(g) * Tiling(g).per_image;
  return kXi * (plane_stride(g.k * g.c) + plane_stride(g.c * tiles) + plane_stride(g.k * tiles));
}

template <typename T>
void winograd3x3_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* work) {
  const Tiling tl(g);
  const std::int64_t chunk = winograd3x3_chunk_images(g), us = plane_stride(g.k * g.c);
  T* u = work;
  { SPARQ_PROFILE_SCOPE("winograd.transform_weights"); transform_weights(g, w, u); }
  for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const std::int64_t nb = std::min(chunk, g.n - n0), tiles = nb * tl.per_image;
    const std::int64_t vs = plane_stride(g.c * tiles), ms = plane_stride(g.k * tiles);
    T* v = u + kXi * us;
    T* m = v + kXi * vs;
    { SPARQ_PROFILE_SCOPE("winograd.transform_input"); transform_input(g, g.c, x + n0 * g.c * g.h * g.w, nb, v); }
#pragma omp parallel for schedule(static)
    for (std::int64_t xi = 0; xi < kXi; ++xi) {
      matmul<T>(GemmShape{false, false, g.k, tiles, g.c}, T(1), u + xi * us, v + xi * vs, T(0),
                m + xi * ms);
    }
    { SPARQ_PROFILE_SCOPE("winograd.transform_output"); transform_output(g, g.k, m, nb, b, y + n0 * g.k * g.h * g.w); }
  }
}

template <typename T>
void winograd3x3_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw,
                          T* db, T* work) {
  const Tiling tl(g);
  const std::int64_t chunk = winograd3x3_chunk_images(g), us = plane_stride(g.k * g.c);
  const std::int64_t hw = g.h * g.w;
  T* u = work;  // U for the input gradient, then dU for the weight gradient
  T* v = u + kXi * us;
  if (dx != nullptr) {
    // dX = conv(dY, flipped kernel with C and K swapped): U_flip(xi)^T as the [C, K] factor.
    { SPARQ_PROFILE_SCOPE("winograd.transform_weights"); transform_weights(g, w, u); }
    for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      const std::int64_t nb = std::min(chunk, g.n - n0), tiles = nb * tl.per_image;
      const std::int64_t vs = plane_stride(g.k * tiles), ms = plane_stride(g.c * tiles);
      T* m = v + kXi * vs;
      { SPARQ_PROFILE_SCOPE("winograd.transform_input"); transform_input(g, g.k, dy + n0 * g.k * hw, nb, v); }
#pragma omp parallel for schedule(static)
      for (std::int64_t xi = 0; xi < kXi; ++xi) {
        matmul<T>(GemmShape{true, false, g.c, tiles, g.k}, T(1), u + flip_xi(xi) * us,
                  v + xi * vs, T(0), m + xi * ms);
      }
      { SPARQ_PROFILE_SCOPE("winograd.transform_output"); transform_output(g, g.c, m, nb, static_cast<const T*>(nullptr), dx + n0 * g.c * hw); }
    }
  }
  if (dw != nullptr) {
    for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      const std::int64_t nb = std::min(chunk, g.n - n0), tiles = nb * tl.per_image;
      const std::int64_t vs = plane_stride(g.c * tiles), ms = plane_stride(g.k * tiles);
      T* dm = v + kXi * vs;
      { SPARQ_PROFILE_SCOPE("winograd.transform_input"); transform_input(g, g.c, x + n0 * g.c * hw, nb, v); }
      { SPARQ_PROFILE_SCOPE("winograd.transform_output"); transform_output_adjoint(g, dy + n0 * g.k * hw, nb, dm); }
      // Each xi's sum runs over the chunks in image order, whatever thread computes it.
#pragma omp parallel for schedule(static)
      for (std::int64_t xi = 0; xi < kXi; ++xi) {
        matmul<T>(GemmShape{false, true, g.k, g.c, tiles}, T(1), dm + xi * ms, v + xi * vs,
                  n0 == 0 ? T(0) : T(1), u + xi * us);
      }
    }
    if (g.n > 0) { SPARQ_PROFILE_SCOPE("winograd.transform_weights"); fold_weight_gradient(g, u, dw); }
  }
  if (db != nullptr) conv2d_bias_backward(g, dy, db);
}

template void winograd3x3_forward<float>(const Conv2dGeom&, const float*, const float*,
                                         const float*, float*, float*);
template void winograd3x3_forward<double>(const Conv2dGeom&, const double*, const double*,
                                          const double*, double*, double*);
template void winograd3x3_backward<float>(const Conv2dGeom&, const float*, const float*,
                                          const float*, float*, float*, float*, float*);
template void winograd3x3_backward<double>(const Conv2dGeom&, const double*, const double*,
                                           const double*, double*, double*, double*, double*);

}  // namespace sparq::cpu
