// CUDA attention core kernels: one block per probability row (b, h, i). Max, sum and the
// backward's row dot are fixed-order block reductions (reduce.cuh), so results are
// deterministic. The masking rules, the fully-masked-row rule and the float expressions are
// those of cpu::attention_forward/backward; dropout draws come from attention_dropout.h,
// which reproduces cpu::dropout_scales exactly (one Philox block per element here: simple,
// and the block cost is small next to the row's memory traffic).
#include "layers/cuda/attention_cuda.h"

#include <math_constants.h>

#include "core/cuda/cuda_check.h"
#include "layers/cuda/attention_dropout.h"
#include "layers/cuda/reduce.cuh"

namespace sparq::cuda {
namespace {

constexpr int kRowThreads = 128;
constexpr int kFlatThreads = 256;

// What one row's kernel needs, decoded once from blockIdx.x.
struct Row {
  std::int64_t index;  // (b*H + h)*T + i
  std::int64_t i, b;
  __device__ Row(const AttentionShape& s)
      : index(blockIdx.x), i(index % s.seq), b(index / s.seq / s.heads) {}
  // Keys a causal row reads: j <= i.
  __device__ std::int64_t end(const AttentionShape& s) const { return s.causal ? i + 1 : s.seq; }
  __device__ bool visible(const AttentionShape& s, std::int64_t j) const {
    if (s.causal && j > i) return false;
    return s.key_valid == nullptr || s.key_valid[b * s.seq + j] != 0;
  }
};

__device__ float dropout_scale(const AttentionDropout& d, float keep_scale, std::int64_t e) {
  return attention_dropout_scale(d.seed, d.stream, d.first + static_cast<std::uint64_t>(e), d.p,
                                 keep_scale);
}

__global__ void softmax_forward_kernel(AttentionShape s, float scale, AttentionDropout d,
                                       float keep_scale, float* probs, float* dropped) {
  const Row row(s);
  const std::int64_t t = s.seq, end = row.end(s);
  float* r = probs + row.index * t;
  float mx = -CUDART_INF_F;
  for (std::int64_t j = threadIdx.x; j < end; j += blockDim.x) {
    if (row.visible(s, j)) mx = MaxOp{}(mx, r[j] * scale);
  }
  mx = block_reduce(mx, MaxOp{}, -CUDART_INF_F);
  const bool any_visible = mx != -CUDART_INF_F;  // the same for the whole block
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < end && any_visible; j += blockDim.x) {
    const float e = row.visible(s, j) ? expf(r[j] * scale - mx) : 0.0f;
    r[j] = e;  // only this thread touches column j
    sum += e;
  }
  sum = block_reduce(sum, SumOp{}, 0.0f);
  const float inv = any_visible ? 1.0f / sum : 0.0f;
  for (std::int64_t j = threadIdx.x; j < t; j += blockDim.x) {
    const float p = any_visible && j < end ? r[j] * inv : 0.0f;
    r[j] = p;
    if (d.p > 0.0f) dropped[row.index * t + j] = dropout_scale(d, keep_scale, row.index * t + j) * p;
  }
}

__global__ void dropout_probs_kernel(AttentionDropout d, float keep_scale, const float* probs,
                                     float* dropped, std::int64_t n) {
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    dropped[e] = dropout_scale(d, keep_scale, e) * probs[e];
  }
}

__global__ void softmax_backward_kernel(AttentionShape s, AttentionDropout d, float keep_scale,
                                        const float* probs, float* dp) {
  const Row row(s);
  const std::int64_t t = s.seq;
  const float* pr = probs + row.index * t;
  float* dr = dp + row.index * t;
  float dot = 0.0f;
  for (std::int64_t j = threadIdx.x; j < t; j += blockDim.x) {
    float g = dr[j];
    if (d.p > 0.0f) g *= dropout_scale(d, keep_scale, row.index * t + j);
    dr[j] = g;  // only this thread touches column j
    dot += pr[j] * g;
  }
  dot = block_reduce(dot, SumOp{}, 0.0f);
  for (std::int64_t j = threadIdx.x; j < t; j += blockDim.x) dr[j] = pr[j] * (dr[j] - dot);
}

float keep_scale_of(const AttentionDropout& d) {
  return d.p > 0.0f ? 1.0f / (1.0f - d.p) : 1.0f;  // the CPU's T(1) / (T(1) - T(p))
}

unsigned row_blocks(const AttentionShape& s) {
  return static_cast<unsigned>(s.batch * s.heads * s.seq);
}

}  // namespace

void attention_softmax_forward(const AttentionShape& shape, float scale,
                               const AttentionDropout& dropout, float* probs, float* dropped,
                               cudaStream_t stream) {
  if (row_blocks(shape) == 0) return;
  softmax_forward_kernel<<<row_blocks(shape), kRowThreads, 0, stream>>>(
      shape, scale, dropout, keep_scale_of(dropout), probs, dropped);
  CUDA_CHECK(cudaGetLastError());
}

void attention_dropout_probs(const AttentionShape& shape, const AttentionDropout& dropout,
                             const float* probs, float* dropped, cudaStream_t stream) {
  const std::int64_t n = shape.batch * shape.heads * shape.seq * shape.seq;
  if (n == 0) return;
  const std::int64_t blocks = (n + kFlatThreads - 1) / kFlatThreads;
  dropout_probs_kernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8),
                         kFlatThreads, 0, stream>>>(dropout, keep_scale_of(dropout), probs,
                                                    dropped, n);
  CUDA_CHECK(cudaGetLastError());
}

void attention_softmax_backward(const AttentionShape& shape, const AttentionDropout& dropout,
                                const float* probs, float* dp, cudaStream_t stream) {
  if (row_blocks(shape) == 0) return;
  softmax_backward_kernel<<<row_blocks(shape), kRowThreads, 0, stream>>>(
      shape, dropout, keep_scale_of(dropout), probs, dp);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
