// The CPU fast path of Conv2d for 3x3 kernels, stride 1, padding 1, dilation 1 (VGG's only
// convolution): Winograd F(2x2, 3x3), forward, input gradient and weight gradient.
//
// Method (Lavin & Gray's minimal filtering): the output is cut into 2x2 tiles; tile t reads a
// 4x4 input patch d_t (zero outside the image) and
//   y_t = A^T [ (G g G^T) (.) (B^T d_t B) ] A            ((.) = elementwise, 16 products)
// for every (k, c) pair, summed over c. The 16 elementwise positions xi are 16 independent
// GEMMs  M_xi[K, tiles] = U_xi[K, C] * V_xi[C, tiles], which is where the time goes: 16 * C * K
// multiply-adds per tile instead of 36 * C * K for direct convolution (2.25x fewer).
//   * input gradient: the same algorithm applied to dY with the kernel flipped and its
//     channels swapped; flipping permutes the transformed positions (rows/columns 0 <-> 3 of
//     U), so it reuses U with a transposed GEMM.
//   * weight gradient: the adjoint of the forward, dU_xi[K, C] = sum over tiles of
//     (A dY_t A^T)_xi * V_xi^T, then dW += G^T dU G per (k, c).
// All three equal the direct convolution's results in exact arithmetic; in floating point
// they round differently (the transforms add a few operations per value, error ~1e-6
// relative in float), so they are not bit-equal to the general im2col path.
//
// Tiles are processed in chunks of winograd3x3_chunk_images(g) whole images (fixed by the
// geometry). Within a chunk the transforms run in parallel over (image, channel) planes and
// the 16 GEMMs in parallel over xi, each single-threaded; the weight gradient sums chunks in
// image order. Nothing depends on the thread count, so results are the same for any number
// of threads.
//
// Workspace (winograd3x3_workspace_elems): U or dU, 16*K*C, then the chunk's transformed
// input and product, 16*(C+K)*chunk tiles. VGG-16 at 32x32: 6M floats (24 MB) for the largest
// layer (512 channels); Conv2d shares one such buffer between all its fast-path layers
// (conv2d.h).
#pragma once

#include <cstdint>

#include "layers/conv2d.h"

namespace sparq::cpu {

// True where Conv2d takes this path: the geometry above, width up to 512 and at least 16
// input channels (below that im2col is faster). The kernels themselves accept any c >= 1.
bool winograd3x3_applies(const Conv2dGeom& g);
// Images per chunk: ~512 tiles, fewer when many channels would make the chunk large.
std::int64_t winograd3x3_chunk_images(const Conv2dGeom& g);
// Elements of T the calls below need (g.n is ignored: chunks bound the size).
std::int64_t winograd3x3_workspace_elems(const Conv2dGeom& g);

template <typename T>
void winograd3x3_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* work);
// dx (overwritten) may be null; dw and db (+=) may be null.
template <typename T>
void winograd3x3_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw,
                          T* db, T* work);

}  // namespace sparq::cpu
