// Note [Non-finite local gradients] (compress/gradient_exchange.h) on a CUDA device: the
// kernels of DeviceNonfiniteGuard (compress/device_nonfinite.h). Verdicts are uint32 words in
// device memory, written only to set them (any number of writers write the same 1), so the
// host never reads them inside the step. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "compress/span_stats.h"

namespace sparq::cuda {

// *word = 1 when some g[i], i < n, is NaN or infinite (one read pass over g).
void flag_nonfinite(const float* g, std::size_t n, std::uint32_t* word, cudaStream_t stream);
// *word = 1 when input->sum_a is not finite: the exchange's ||g + e||^2, measured anyway with
// error feedback (DeviceBucketMetrics), is NaN or infinite exactly when g + e is somewhere.
void flag_nonfinite_sum(const compress::SpanStats* input, std::uint32_t* word, cudaStream_t stream);
// g[i] = 0 for i < n when *word != 0.
void zero_if_flagged(float* g, std::size_t n, const std::uint32_t* word, cudaStream_t stream);
// *count = the sum of words[0, m) (an int32, for a collective to add across ranks).
void count_flags(const std::uint32_t* words, std::size_t m, std::int32_t* count,
                 cudaStream_t stream);
// out[i] = NaN for i < n when *count > 0.
void poison_if_counted(float* out, std::size_t n, const std::int32_t* count, cudaStream_t stream);

}  // namespace sparq::cuda
