// CUDA VocabBias: an elementwise add over a 2-D grid (columns by threads, rows by grid
// rows) and the shared deterministic column reduction of reduce.cuh for the gradient.
#include "layers/cuda/vocab_bias_cuda.h"

#include "core/cuda/cuda_check.h"
#include "layers/cuda/reduce.cuh"

namespace sparq::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxGridRows = 65535;  // gridDim.y limit; the kernel strides past it

__global__ void add_bias_kernel(const float* b, float* y, std::int64_t rows, std::int64_t vocab) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= vocab) return;
  const float bj = b[j];
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) y[r * vocab + j] += bj;
}

}  // namespace

void vocab_bias_forward(const float* b, float* y, std::int64_t rows, std::int64_t vocab,
                        cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return;
  const dim3 grid(static_cast<unsigned>((vocab + kThreads - 1) / kThreads),
                  static_cast<unsigned>(rows < kMaxGridRows ? rows : kMaxGridRows));
  add_bias_kernel<<<grid, kThreads, 0, stream>>>(b, y, rows, vocab);
  CUDA_CHECK(cudaGetLastError());
}

std::size_t vocab_bias_backward_scratch_floats(std::int64_t vocab) {
  return column_sums_scratch_floats(vocab);
}

void vocab_bias_backward(const float* dy, float* db, float* scratch, std::int64_t rows,
                         std::int64_t vocab, cudaStream_t stream) {
  column_sums_accumulate(MatrixEntry{dy, vocab}, rows, vocab, scratch, db, stream);
}

}  // namespace sparq::cuda
