// SendHistory (compress/send_history.h) on a CUDA device, for log.never_sent_window with a GPU
// store: the same stamps and the same count (compress/send_window.h's rule), enqueued on the
// exchange's stream. The count is an integer sum, exact in any order. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

// last[i] = stamp wherever decoded[i] != 0, for i < n.
void stamp_sent(std::uint32_t* last, const float* decoded, std::size_t n, std::uint32_t stamp,
                cudaStream_t stream);

// *count (device memory) = the number of i < n with last[i] <= cutoff.
void count_unsent(const std::uint32_t* last, std::size_t n, std::uint32_t cutoff,
                  unsigned long long* count, cudaStream_t stream);

}  // namespace sparq::cuda
