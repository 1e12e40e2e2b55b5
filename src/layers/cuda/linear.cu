#include "core/cuda/cuda_check.h"
#include "layers/cuda/dense_launch.h"
#include "layers/cuda/linear_cuda.h"

namespace sparq::cuda {
namespace {

// y[i, j] += b[j] over the n * out elements of y.
__global__ void add_bias_kernel(const float* b, float* y, std::int64_t n, std::int64_t out) {
  const std::int64_t total = n * out;
  for (std::int64_t e = dense::first_index(); e < total; e += dense::grid_stride())
    y[e] += b[e % out];
}

// db[j] += sum_i dy[i, j], one thread per column adding rows in ascending order onto the old
// db[j]: the CPU's order exactly, so no atomics and the same bits as the CPU. Neighbouring
// threads read neighbouring columns of a row, so every row read is coalesced.
__global__ void bias_grad_kernel(const float* dy, float* db, std::int64_t n, std::int64_t out) {
  for (std::int64_t j = dense::first_index(); j < out; j += dense::grid_stride()) {
    float acc = db[j];
    for (std::int64_t i = 0; i < n; ++i) acc += dy[i * out + j];
    db[j] = acc;
  }
}

}  // namespace

void add_bias(const float* b, float* y, std::int64_t n, std::int64_t out, cudaStream_t stream) {
  if (n == 0) return;
  add_bias_kernel<<<dense::blocks_for(n * out), dense::kThreads, 0, stream>>>(b, y, n, out);
  CUDA_CHECK(cudaGetLastError());
}

void add_bias_grad(const float* dy, float* db, std::int64_t n, std::int64_t out,
                   cudaStream_t stream) {
  if (n == 0) return;
  bias_grad_kernel<<<dense::blocks_for(out), dense::kThreads, 0, stream>>>(dy, db, n, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
