#include "core/cuda/cuda_check.h"
#include "layers/cuda/dense_launch.h"
#include "layers/cuda/linear_cuda.h"
#include "layers/cuda/reduce.cuh"

namespace sparq::cuda {
namespace {

// y[i, j] += b[j] over the n * out elements of y.
__global__ void add_bias_kernel(const float* b, float* y, std::int64_t n, std::int64_t out) {
  const std::int64_t total = n * out;
  for (std::int64_t e = dense::first_index(); e < total; e += dense::grid_stride())
    y[e] += b[e % out];
}

}  // namespace

void add_bias(const float* b, float* y, std::int64_t n, std::int64_t out, cudaStream_t stream) {
  if (n == 0) return;
  add_bias_kernel<<<dense::blocks_for(n * out), dense::kThreads, 0, stream>>>(b, y, n, out);
  CUDA_CHECK(cudaGetLastError());
}

std::size_t bias_grad_scratch_floats(std::int64_t out) { return column_sums_scratch_floats(out); }

void add_bias_grad(const float* dy, float* db, float* scratch, std::int64_t n, std::int64_t out,
                   cudaStream_t stream) {
  column_sums_accumulate(MatrixEntry{dy, out}, n, out, scratch, db, stream);
}

}  // namespace sparq::cuda
