// compress/span_stats.h on a CUDA device: the same doubles added in the same order (Note
// [Fixed-partition sums]): one thread per (chunk, lane) sums its lane, one thread per chunk
// adds the lanes and the tail, one thread adds the chunks. The result stays on the device
// (the codecs read it there), so nothing waits for the host. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "compress/span_stats.h"

namespace sparq::cuda {

std::size_t span_stats_scratch_bytes(std::size_t n);

// *out (device memory) = compress::span_stats(x, n, a, b); scratch holds
// span_stats_scratch_bytes(n). With `plus` the values are x[i] + plus[i] (the float sum, as
// the CPU's accumulate forms a = g + e): the device exchange's measure of ||g + e||^2 before
// an encode overwrites e.
void span_stats(const float* x, std::size_t n, compress::StatTerm a, compress::StatTerm b,
                void* scratch, compress::SpanStats* out, cudaStream_t stream,
                const float* plus = nullptr);

}  // namespace sparq::cuda
