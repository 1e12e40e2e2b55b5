// CUDA softmax cross-entropy, in three kernels on one stream:
//   1. count_targets: one block counts the rows that enter the mean (an integer sum: exact in
//      any order) and finds the first invalid target (a min: exact in any order);
//   2. cross_entropy_rows: one block per row, max and sum of exponentials by fixed-order
//      block reductions, the loss, and the gradient fused into the last pass over the row;
//   3. sum_row_losses: one block adds the per-row losses in double in a fixed order.
// The arithmetic per element is the CPU's (expf/logf, the same float expressions); only the
// summation order differs, and it is fixed, so the result is deterministic.
#include "layers/cuda/cross_entropy_cuda.h"

#include <math_constants.h>

#include "core/cuda/cuda_check.h"
#include "layers/cuda/reduce.cuh"

namespace sparq::cuda {
namespace {

constexpr int kSingleBlockThreads = 1024;
constexpr int kRowThreads = 256;

__device__ bool target_valid(std::int32_t t, std::int64_t valid) { return t >= 0 && t < valid; }

__global__ void count_targets_kernel(const std::int32_t* targets, std::int64_t n,
                                     std::int64_t valid, std::int32_t ignore_index,
                                     CrossEntropyTotals* totals) {
  long long counted = 0, first_bad = n;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::int32_t t = targets[i];
    if (t == ignore_index) continue;
    if (target_valid(t, valid)) {
      ++counted;
    } else if (i < first_bad) {
      first_bad = i;
    }
  }
  counted = block_reduce(counted, SumOp{}, 0LL);
  first_bad = block_reduce(first_bad, MinOp{}, static_cast<long long>(n));
  if (threadIdx.x == 0) {
    totals->loss_sum = 0;
    totals->counted = counted;
    totals->first_bad_row = first_bad < n ? first_bad : -1;
    totals->bad_target = first_bad < n ? targets[first_bad] : 0;
  }
}

// logits and dlogits may alias: within each pass a column is read and written by one thread
// only, and the reads of other columns (max, sum, the target logit) all happen before the
// block reduction that precedes the writing pass.
__global__ void cross_entropy_rows_kernel(const float* logits, const std::int32_t* targets,
                                          float* dlogits, float* row_loss, std::int64_t v,
                                          std::int64_t valid, std::int32_t ignore_index,
                                          float dloss, const CrossEntropyTotals* totals) {
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * v;
  float* dx = dlogits != nullptr ? dlogits + row * v : nullptr;
  const std::int32_t t = targets[row];
  if (t == ignore_index || !target_valid(t, valid)) {  // the same branch for the whole block
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    if (dx != nullptr) {
      for (std::int64_t j = threadIdx.x; j < v; j += blockDim.x) dx[j] = 0.0f;
    }
    return;
  }
  float mx = -CUDART_INF_F;
  for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x) mx = MaxOp{}(mx, x[j]);
  mx = block_reduce(mx, MaxOp{}, -CUDART_INF_F);
  const float target_logit = x[t];
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x) sum += expf(x[j] - mx);
  sum = block_reduce(sum, SumOp{}, 0.0f);
  if (threadIdx.x == 0) row_loss[row] = logf(sum) + mx - target_logit;
  if (dx == nullptr) return;
  const long long counted = totals->counted;  // >= 1: this row counts
  const float grad_scale = dloss / static_cast<float>(counted);
  const float k = grad_scale / sum;
  for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    float g = expf(x[j] - mx) * k;
    if (j == t) g -= grad_scale;
    dx[j] = g;
  }
  for (std::int64_t j = valid + threadIdx.x; j < v; j += blockDim.x) dx[j] = 0.0f;
}

__global__ void sum_row_losses_kernel(const float* row_loss, std::int64_t n,
                                      CrossEntropyTotals* totals) {
  double total = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) total += row_loss[i];
  total = block_reduce(total, SumOp{}, 0.0);
  if (threadIdx.x == 0) totals->loss_sum = total;
}

}  // namespace

void cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits,
                   float* row_loss, std::int64_t n, std::int64_t v, std::int64_t valid,
                   std::int32_t ignore_index, float dloss, CrossEntropyTotals* totals,
                   CrossEntropyTotals* host_totals, cudaStream_t stream) {
  count_targets_kernel<<<1, kSingleBlockThreads, 0, stream>>>(targets, n, valid, ignore_index,
                                                              totals);
  CUDA_CHECK(cudaGetLastError());
  if (n > 0) {
    cross_entropy_rows_kernel<<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(
        logits, targets, dlogits, row_loss, v, valid, ignore_index, dloss, totals);
    CUDA_CHECK(cudaGetLastError());
  }
  sum_row_losses_kernel<<<1, kSingleBlockThreads, 0, stream>>>(row_loss, n, totals);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpyAsync(host_totals, totals, sizeof(CrossEntropyTotals),
                             cudaMemcpyDeviceToHost, stream));
}

}  // namespace sparq::cuda
