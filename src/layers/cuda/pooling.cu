// Pooling kernels: one thread per output cell (forward) or per input pixel (backward), each
// running the shared per-cell function of layers/cuda/pooling_windows.h. Grid-stride loops
// over 64-bit indices; every thread writes only its own element, so there are no races and
// no atomics, and the results do not depend on the launch configuration.
#include "core/cuda/cuda_check.h"
#include "layers/cuda/pooling_cuda.h"

namespace sparq::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 8192;  // grid-stride beyond this

int blocks_for(std::int64_t total) {
  const std::int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ std::int64_t index_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__global__ void max_pool_forward_kernel(PoolGeom g, const float* x, float* y,
                                        std::int32_t* argmax) {
  const std::int64_t cells = g.out_h * g.out_w, total = g.planes * cells;
  for (std::int64_t o = first_index(); o < total; o += index_stride()) {
    const std::int64_t p = o / cells, oy = o % cells / g.out_w, ox = o % g.out_w;
    argmax[o] = pooling::max_pool_cell(g, x + p * g.h * g.w, oy, ox, &y[o]);
  }
}

__global__ void max_pool_backward_kernel(PoolGeom g, const std::int32_t* argmax, const float* dy,
                                         float* dx) {
  const std::int64_t pixels = g.h * g.w, cells = g.out_h * g.out_w, total = g.planes * pixels;
  for (std::int64_t i = first_index(); i < total; i += index_stride()) {
    const std::int64_t p = i / pixels, iy = i % pixels / g.w, ix = i % g.w;
    dx[i] = pooling::max_pool_dx_at(g, argmax + p * cells, dy + p * cells, iy, ix);
  }
}

__global__ void avg_pool_forward_kernel(PoolGeom g, const float* x, float* y) {
  const std::int64_t cells = g.out_h * g.out_w, total = g.planes * cells;
  for (std::int64_t o = first_index(); o < total; o += index_stride()) {
    const std::int64_t p = o / cells, oy = o % cells / g.out_w, ox = o % g.out_w;
    y[o] = pooling::avg_pool_cell(g, x + p * g.h * g.w, oy, ox);
  }
}

__global__ void avg_pool_backward_kernel(PoolGeom g, const float* dy, float* dx) {
  const std::int64_t pixels = g.h * g.w, cells = g.out_h * g.out_w, total = g.planes * pixels;
  for (std::int64_t i = first_index(); i < total; i += index_stride()) {
    const std::int64_t p = i / pixels, iy = i % pixels / g.w, ix = i % g.w;
    dx[i] = pooling::avg_pool_dx_at(g, dy + p * cells, iy, ix);
  }
}

}  // namespace

void max_pool_forward(const PoolGeom& g, const float* x, float* y, std::int32_t* argmax,
                      cudaStream_t stream) {
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  if (total <= 0) return;
  max_pool_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(g, x, y, argmax);
  CUDA_CHECK(cudaGetLastError());
}

void max_pool_backward(const PoolGeom& g, const std::int32_t* argmax, const float* dy, float* dx,
                       cudaStream_t stream) {
  const std::int64_t total = g.planes * g.h * g.w;
  if (total <= 0) return;
  max_pool_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(g, argmax, dy, dx);
  CUDA_CHECK(cudaGetLastError());
}

void avg_pool_forward(const PoolGeom& g, const float* x, float* y, cudaStream_t stream) {
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  if (total <= 0) return;
  avg_pool_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(g, x, y);
  CUDA_CHECK(cudaGetLastError());
}

void avg_pool_backward(const PoolGeom& g, const float* dy, float* dx, cudaStream_t stream) {
  const std::int64_t total = g.planes * g.h * g.w;
  if (total <= 0) return;
  avg_pool_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(g, dy, dx);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
