// Exact top-k on a CUDA device: the same indices, in the same ascending order, with the same
// values as compress::TopkSelector::exact (topk_select.h) for the same input: the k largest
// |a[i]|, ties at the boundary magnitude going to the lowest indices. The selection is a
// radix selection on the magnitude bits, as the CPU's, in three levels of 11, 10 and 10 bits
// whose histograms fit in shared memory (Note [Radix selection by levels on the device],
// compress/radix_levels.h; integer counts, which do not depend on the order of the atomic
// adds), then a stable compaction by two prefix sums (CUB): one ranks the entries
// equal to the threshold, the other places the kept ones. No float is reordered or summed,
// so the result is exact. k is known on the host and so is the output size: nothing waits
// for the device.
//
// Every pointer is device memory; work is enqueued on `stream`. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

// Device scratch topk_exact needs for n entries (about 12 n bytes plus CUB's scan storage).
std::size_t topk_scratch_bytes(std::size_t n);

// out_idx[0..k) and, when out_values is not null, out_values[0..k) = a[out_idx[j]].
// Preconditions: 0 < k <= n < 2^31, scratch of at least topk_scratch_bytes(n) bytes, and all
// entries finite (as on the CPU).
void topk_exact(const float* a, std::size_t n, std::size_t k, std::uint32_t* out_idx,
                float* out_values, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream);

// topk_exact enqueued behind a device-side decision: every pass but CUB's two scans returns at
// once unless *gate != 0 (a device word that work earlier on `stream` writes), and the outputs
// are then left untouched. select_sampled (varcount_select_cuda.h) needs the exact result
// only when its rule ends exact, which only the device knows.
void topk_exact_if(const std::uint32_t* gate, const float* a, std::size_t n, std::size_t k,
                   std::uint32_t* out_idx, float* out_values, void* scratch,
                   std::size_t scratch_bytes, cudaStream_t stream);

}  // namespace sparq::cuda
