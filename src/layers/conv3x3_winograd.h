// The CPU fast path of Conv2d for 3x3 kernels, stride 1, padding 1, dilation 1 (VGG's only
// convolution): Winograd F(4x4, 3x3), or F(2x2, 3x3) where that needs fewer products (2x2
// maps, for example); forward, input gradient and weight gradient.
//
// Method (Lavin & Gray's minimal filtering): the output is cut into m x m tiles (m = 4 or
// 2); tile t reads an a x a input patch d_t (a = m + 2, zero outside the image) and
//   y_t = A^T [ (G g G^T) (.) (B^T d_t B) ] A            ((.) = elementwise, a^2 products)
// for every (k, c) pair, summed over c (the matrices: conv3x3_winograd_tiles.h). The a^2
// elementwise positions xi are a^2 independent GEMMs M_xi[K, tiles] = U_xi[K, C] *
// V_xi[C, tiles], which is where the time goes: per output, 36/16 * C * K multiply-adds for
// F(4x4) and 16/4 * C * K for F(2x2), instead of 9 * C * K for direct convolution.
//   * input gradient: the same algorithm applied to dY with the kernel turned by 180 degrees
//     and its channels swapped (U of the turned kernel, through a transposed GEMM).
//   * weight gradient: the adjoint of the forward, dU_xi[K, C] = sum over tiles of
//     (A dY_t A^T)_xi * V_xi^T, then dW += G^T dU G per (k, c).
// All three equal the direct convolution's results in exact arithmetic; in floating point
// they round differently (the transforms add operations per value: error ~1e-6 relative in
// float for F(2x2), ~1e-5 for F(4x4)), so they are not bit-equal to the general im2col path.
//
// Tiles are processed in chunks of winograd3x3_chunk_images(g) whole images (fixed by the
// geometry). Within a chunk the transforms run in parallel over (image, channel) planes and
// the GEMMs in parallel over xi, each single-threaded; the weight gradient sums chunks in
// image order. Nothing depends on the thread count, so results are the same for any number
// of threads.
//
// Workspace (winograd3x3_workspace_elems): U or dU, a^2*K*C, then the chunk's transformed
// input and product, a^2*(C+K)*chunk tiles. VGG-16 at 32x32: about 11.8M floats (47 MB)
// for its largest layers (512 channels on F(4x4), whose U alone is 36 * 512 * 512 floats;
// measured in review, 2026-12-06); Conv2d shares one such buffer between all its fast-path
// layers (conv2d.h).
#pragma once

#include <cstdint>

#include "layers/conv2d.h"

namespace sparq::cpu {

// True where Conv2d takes this path: the geometry above, width up to 512 and at least 16
// input channels (below that im2col is faster). The kernels themselves accept any c >= 1.
bool winograd3x3_applies(const Conv2dGeom& g);
// The output tile the geometry gets: 4 or 2, whichever needs fewer elementwise products per
// image (2 on a tie): 4 for 3x3, 4x4 and 7x7 maps and up, 2 for 1x1, 2x2, 5x5 and 6x6.
// Every call below takes `tile`: 0 is this choice, 2 or 4 force one (tests, benchmarks).
int winograd3x3_tile(const Conv2dGeom& g);
// Images per chunk: ~512 tiles, fewer when many channels would make the chunk large.
std::int64_t winograd3x3_chunk_images(const Conv2dGeom& g, int tile = 0);
// Elements of T the calls below need (g.n is ignored: chunks bound the size).
std::int64_t winograd3x3_workspace_elems(const Conv2dGeom& g, int tile = 0);

template <typename T>
void winograd3x3_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* work,
                         int tile = 0);
// dx (overwritten) may be null; dw and db (+=) may be null.
template <typename T>
void winograd3x3_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw,
                          T* db, T* work, int tile = 0);

}  // namespace sparq::cpu
