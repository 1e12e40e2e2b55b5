// The global L2 norm of a device f32 buffer and the clip scale derived from it, both left in
// device memory (global_norm.cu), so a clipped optimizer step needs no host round trip for the
// scale; the caller copies the 8-byte norm back for its metrics and skip decision.
//
// Deterministic: a fixed partition independent of the device and of timing. Exactly
// kNormBlocks blocks of kNormThreads threads; thread t of block b accumulates, in double and in
// index order, elements b * kNormThreads + t + k * kNormBlocks * kNormThreads; each block sums
// its threads by a fixed shared-memory tree into partials[b]; then one block sums the
// partials (thread t takes t, t + kNormThreads, ... in order, then the same tree). The same
// input gives the same bits on every run. It differs from the CPU's ops::sum_squares (also
// double, other order) only by rounding: relative error far below 1e-10 for any buffer size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparq::optim::cuda {

constexpr int kNormBlocks = 1024;
constexpr int kNormThreads = 256;

// Asynchronous on `stream`. x: n device floats. partials: kNormBlocks device doubles
// (scratch). Writes *norm = sqrt(sum x^2) and *scale = clip_scale(*norm, max_norm) (update_math.h:
// min(1, max_norm / (norm + 1e-6)) as clip_grad_norm computes it; 1 when max_norm <= 0).
void global_norm(const float* x, std::int64_t n, double max_norm, double* partials,
                 double* norm, float* scale, cudaStream_t stream);

}  // namespace sparq::optim::cuda
