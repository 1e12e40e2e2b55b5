#include "compress/cuda/grid.cuh"
#include "compress/cuda/tree_cuda.h"
#include "compress/quant_math.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__global__ void add_into_kernel(float* e, const float* g, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += stride()) e[i] = __fadd_rn(e[i], g[i]);
}

// Indices are bounds-checked as well: a message that failed validation leaves them unset.
__device__ bool usable(SparseDecoded global, std::size_t j, std::size_t n) {
  return *global.verdict == kSparseValid && global.idx[j] < n;
}

__global__ void mark_kernel(float* dense, std::size_t n, SparseDecoded list, std::size_t k) {
  for (std::size_t j = first_index(); j < k; j += stride()) {
    if (usable(list, j, n) && dense[list.idx[j]] == 0.0f)
      dense[list.idx[j]] = compress::kListedZero;
  }
}

__global__ void gather_kernel(const float* a, std::size_t n, SparseDecoded global,
                              std::size_t k, float* values) {
  for (std::size_t j = first_index(); j < k; j += stride()) {
    values[j] = usable(global, j, n) ? a[global.idx[j]] : 0.0f;
  }
}

__global__ void apply_kernel(float* bucket, std::size_t n, SparseDecoded global, std::size_t k,
                             const float* values, float inv_p, float* a, bool residual,
                             float* own_decoded) {
  for (std::size_t j = first_index(); j < k; j += stride()) {
    if (!usable(global, j, n)) continue;
    const std::uint32_t i = global.idx[j];
    bucket[i] = __fmul_rn(values[j], inv_p);
    if (own_decoded != nullptr) own_decoded[i] = a[i];
    if (residual) a[i] = 0.0f;
  }
}

}  // namespace

void add_into(float* e, const float* g, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_into_kernel<<<grid_for(n), kThreads, 0, stream>>>(e, g, n);
  CUDA_CHECK(cudaGetLastError());
}

void mark_listed_zeros(float* dense, std::size_t n, SparseDecoded list, std::size_t k,
                       cudaStream_t stream) {
  if (k == 0) return;
  mark_kernel<<<grid_for(k), kThreads, 0, stream>>>(dense, n, list, k);
  CUDA_CHECK(cudaGetLastError());
}

void gather_global(const float* a, std::size_t n, SparseDecoded global, std::size_t k,
                   float* values, cudaStream_t stream) {
  if (k == 0) return;
  gather_kernel<<<grid_for(k), kThreads, 0, stream>>>(a, n, global, k, values);
  CUDA_CHECK(cudaGetLastError());
}

void apply_global(float* bucket, std::size_t n, SparseDecoded global, std::size_t k,
                  const float* values, float inv_p, float* a, bool residual, float* own_decoded,
                  cudaStream_t stream) {
  if (k == 0) return;
  apply_kernel<<<grid_for(k), kThreads, 0, stream>>>(bucket, n, global, k, values, inv_p, a,
                                                     residual, own_decoded);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
