// BatchNorm2d's eval-mode kernels (layers/cuda/batch_norm_cuda.h says what and why).
#include "core/cuda/cuda_check.h"
#include "layers/cuda/batch_norm_cuda.h"

namespace sparq::cuda {
namespace {

constexpr int kThreads = 256;  // a power of two: the tree below halves it

__global__ void eval_stats_kernel(const float* running_mean, const float* running_var, float* mean,
                                  float* invstd, std::int64_t c, float eps) {
  const std::int64_t ch = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  mean[ch] = running_mean[ch];
  invstd[ch] = 1.0f / sqrtf(running_var[ch] + eps);
}

// One block per channel. Thread t owns elements t, t + kThreads, ... of the channel's n * hw
// (image-major), so both the partial sums and the tree that combines them are fixed.
__global__ void eval_backward_kernel(const float* x, const float* gamma, const float* mean,
                                     const float* invstd, const float* dy, float* dx, float* dgamma,
                                     float* dbeta, std::int64_t n, std::int64_t c,
                                     std::int64_t hw) {
  __shared__ double sum_dy[kThreads];
  __shared__ double sum_dy_xhat[kThreads];
  const std::int64_t ch = blockIdx.x;
  const int t = threadIdx.x;
  const float m = mean[ch], is = invstd[ch], g = gamma[ch] * is;
  double a = 0, b = 0;
  for (std::int64_t e = t; e < n * hw; e += kThreads) {
    const std::int64_t at = (e / hw * c + ch) * hw + e % hw;
    const float d = dy[at], p = x[at];
    a += d;
    b += static_cast<double>(d * (p - m) * is);
    // The CPU's expression with its two training-only mean terms at zero.
    dx[at] = g * (d - 0.0f - (p - m) * is * 0.0f);
  }
  sum_dy[t] = a;
  sum_dy_xhat[t] = b;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      sum_dy[t] += sum_dy[t + half];
      sum_dy_xhat[t] += sum_dy_xhat[t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    dgamma[ch] += static_cast<float>(sum_dy_xhat[0]);
    dbeta[ch] += static_cast<float>(sum_dy[0]);
  }
}

}  // namespace

void batch_norm_eval_stats(const float* running_mean, const float* running_var, float* mean,
                           float* invstd, std::int64_t c, float eps, cudaStream_t stream) {
  if (c <= 0) return;
  const int blocks = static_cast<int>((c + kThreads - 1) / kThreads);
  eval_stats_kernel<<<blocks, kThreads, 0, stream>>>(running_mean, running_var, mean, invstd, c,
                                                     eps);
  CUDA_CHECK(cudaGetLastError());
}

void batch_norm_eval_backward(const float* x, const float* gamma, const float* mean,
                              const float* invstd, const float* dy, float* dx, float* dgamma,
                              float* dbeta, std::int64_t n, std::int64_t c, std::int64_t hw,
                              cudaStream_t stream) {
  if (c <= 0) return;
  if (c > 0x7fffffff) sparq::fatal_error(__FILE__, __LINE__, "batch norm: too many channels");
  eval_backward_kernel<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
      x, gamma, mean, invstd, dy, dx, dgamma, dbeta, n, c, hw);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
