// powersgd's steps on the device (powersgd_cuda.h).
#include "compress/cuda/grid.cuh"
#include "compress/cuda/powersgd_cuda.h"
#include "compress/powersgd_math.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride
using compress::psgd_chunk_dot;
using compress::psgd_chunks;

// One thread per output (i, j), j fastest: the r threads of a row read the same floats.
__global__ void times_factor_kernel(const float* m, std::size_t rows, std::size_t cols,
                                    const float* f, std::size_t r, float* out) {
  for (std::size_t t = first_index(); t < rows * r; t += stride()) {
    const std::size_t i = t / r, j = t % r;
    out[t] = compress::psgd_times_factor(m + i * cols, f, cols, r, j);
  }
}

// One thread per output (k, j): neighbouring threads read neighbouring columns of a row.
__global__ void times_t_factor_kernel(const float* m, std::size_t rows, std::size_t cols,
                                      const float* f, std::size_t r, float* out) {
  for (std::size_t t = first_index(); t < cols * r; t += stride()) {
    const std::size_t k = t / r, j = t % r;
    out[t] = compress::psgd_times_t_factor(m, f, rows, cols, r, k, j);
  }
}

__global__ void decode_kernel(const float* p, const float* q, std::size_t rows, std::size_t cols,
                              std::size_t r, float* y, float* e) {
  for (std::size_t t = first_index(); t < rows * cols; t += stride()) {
    const std::size_t i = t / cols, k = t % cols;
    const float v = compress::psgd_outer(p + i * r, q + k * r, r);
    y[t] = v;
    // The CPU's axpy(-1, y, a): a + (-1) y, which is a - y whether or not it is fused.
    if (e != nullptr) e[t] = __fsub_rn(e[t], v);
  }
}

// Modified Gram-Schmidt in one block, each column projected twice (Note [Gram-Schmidt
// twice]): each dot product's chunks are shared among the threads, then added in chunk order
// by thread 0, as the CPU adds them.
__global__ void orthonormalize_kernel(float* m, std::size_t rows, std::size_t r, double* partial) {
  __shared__ double total;
  const std::size_t chunks = psgd_chunks(rows);
  for (std::size_t j = 0; j < r; ++j) {
    const std::size_t projections = compress::psgd_projections(j);
    for (std::size_t step = 0; step <= projections; ++step) {  // the last step: the norm
      const std::size_t prev = step < projections ? step % j : j;
      for (std::size_t c = threadIdx.x; c < chunks; c += blockDim.x) {
        partial[c] = psgd_chunk_dot(m, rows, r, j, prev, c);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        double sum = 0.0;
        for (std::size_t c = 0; c < chunks; ++c) sum += partial[c];
        total = sum;
      }
      __syncthreads();
      const double d = total;
      if (step < projections) {
        for (std::size_t i = threadIdx.x; i < rows; i += blockDim.x) {
          m[i * r + j] = compress::psgd_subtract(m[i * r + j], d, m[i * r + prev]);
        }
      } else {
        const float inv = compress::psgd_inverse_norm(d);
        for (std::size_t i = threadIdx.x; i < rows; i += blockDim.x) {
          m[i * r + j] = __fmul_rn(m[i * r + j], inv);
        }
      }
      __syncthreads();  // column j is read again by the next dot product
    }
  }
}

__global__ void scale_kernel(const float* src, float* dst, std::size_t n, float scale) {
  for (std::size_t i = first_index(); i < n; i += stride()) dst[i] = __fmul_rn(src[i], scale);
}

// One block: NaN counts as non-zero, as the CPU's `x == 0.0f` test has it.
__global__ void restore_if_zero_kernel(float* v, const float* backup, std::size_t n) {
  bool nonzero = false;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) nonzero = nonzero || !(v[i] == 0.0f);
  if (__syncthreads_or(nonzero)) return;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) v[i] = backup[i];
}

}  // namespace

void psgd_times_factor(const float* m, std::size_t rows, std::size_t cols, const float* f,
                       std::size_t r, float* out, cudaStream_t stream) {
  times_factor_kernel<<<grid_for(rows * r), kThreads, 0, stream>>>(m, rows, cols, f, r, out);
  CUDA_CHECK(cudaGetLastError());
}

void psgd_times_t_factor(const float* m, std::size_t rows, std::size_t cols, const float* f,
                         std::size_t r, float* out, cudaStream_t stream) {
  times_t_factor_kernel<<<grid_for(cols * r), kThreads, 0, stream>>>(m, rows, cols, f, r, out);
  CUDA_CHECK(cudaGetLastError());
}

void psgd_decode(const float* p, const float* q, std::size_t rows, std::size_t cols, std::size_t r,
                 float* y, float* e, cudaStream_t stream) {
  decode_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(p, q, rows, cols, r, y, e);
  CUDA_CHECK(cudaGetLastError());
}

std::size_t psgd_partial_doubles(std::size_t rows) { return psgd_chunks(rows); }

void psgd_orthonormalize(float* m, std::size_t rows, std::size_t r, double* partial,
                         cudaStream_t stream) {
  orthonormalize_kernel<<<1, kThreads, 0, stream>>>(m, rows, r, partial);
  CUDA_CHECK(cudaGetLastError());
}

void psgd_scale(const float* src, float* dst, std::size_t n, float scale, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(src, dst, n, scale);
  CUDA_CHECK(cudaGetLastError());
}

void psgd_restore_if_zero(float* v, const float* backup, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  restore_if_zero_kernel<<<1, kThreads, 0, stream>>>(v, backup, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
