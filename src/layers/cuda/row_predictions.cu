// One block per row: each thread takes the largest prediction key of its strided columns,
// then a block maximum (layers/cuda/reduce.cuh) names the row's prediction.
#include "core/cuda/cuda_check.h"
#include "layers/cuda/reduce.cuh"
#include "layers/cuda/row_predictions_cuda.h"
#include "layers/prediction_rule.h"

namespace sparq::cuda {
namespace {

constexpr int kRowThreads = 256;

__global__ void row_predictions_kernel(const float* logits, std::int64_t width, std::int64_t real,
                                       std::int32_t* predictions) {
  const float* x = logits + static_cast<std::int64_t>(blockIdx.x) * width;
  unsigned long long best = 0;
  for (std::int64_t j = threadIdx.x; j < real; j += blockDim.x) {
    const unsigned long long key = prediction_key(x[j], static_cast<std::uint32_t>(j));
    best = key > best ? key : best;
  }
  best = block_reduce(best, MaxOp{}, 0ULL);
  if (threadIdx.x == 0) predictions[blockIdx.x] = prediction_of_key(best);
}

}  // namespace

void row_predictions(const float* logits, std::int64_t rows, std::int64_t width, std::int64_t real,
                     std::int32_t* predictions, cudaStream_t stream) {
  if (rows == 0) return;
  row_predictions_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, width, real, predictions);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
