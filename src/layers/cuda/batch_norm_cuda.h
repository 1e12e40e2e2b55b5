// Launchers of sparq's own BatchNorm2d kernels (layers/cuda/batch_norm_eval.cu) for what
// cuDNN's batch norm does not do: the eval-mode cache and the eval-mode backward (cuDNN's
// backward always differentiates through the batch statistics). Training runs on cuDNN
// (layers/cuda/batch_norm_cudnn.h). Raw device pointers, x/dy/dx as [n, c, hw]; each call only
// enqueues on `stream`. Free of fmt: nvcc compiles it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparq::cuda {

// mean = running_mean, invstd = 1 / sqrt(running_var + eps): the CPU's eval-mode cache, with
// the same f32 expression (IEEE sqrt and division on both sides, so the same bits).
void batch_norm_eval_stats(const float* running_mean, const float* running_var, float* mean,
                           float* invstd, std::int64_t c, float eps, cudaStream_t stream);

// Eval-mode backward (the statistics are constants): dx = gamma * invstd * dy (overwritten),
// dgamma += sum(dy * (x - mean) * invstd), dbeta += sum(dy) per channel. One block per
// channel sums in double in a fixed order (a fixed element-to-thread assignment, then a fixed
// tree), so the result is the same on every run; no atomics.
void batch_norm_eval_backward(const float* x, const float* gamma, const float* mean,
                              const float* invstd, const float* dy, float* dx, float* dgamma,
                              float* dbeta, std::int64_t n, std::int64_t c, std::int64_t hw,
                              cudaStream_t stream);

}  // namespace sparq::cuda
