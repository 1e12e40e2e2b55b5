// Selections whose count only the device knows, for the sparse f32 messages of topk_sampled
// and threshold (lbs_cuda.h's topk_encode_selected): the CPU's TopkSelector::sampled and
// TopkSelector::at_least (topk_select.h), the same indices in the same ascending order with
// the same values, and their count written to device memory, so the host never waits.
//
// select_at_least keeps every |a[i]| >= threshold (a stable compaction by a prefix sum).
// select_sampled follows compress/sampled_rule.h step for step: the sample's magnitudes
// drawn by Philox and sorted descending (CUB radix sort: the rank-th largest is what the
// CPU's nth_element finds, whatever the order), then up to kSampledAttempts rounds of one
// count over the bucket and a one-thread decision, all on the device; when the rule ends in
// an exact top-k (too many kept, or a sample that cannot reach sampled_min(k)) the result is
// topk_exact's (topk_cuda.h), enqueued behind the rule's outcome (topk_exact_if), so that
// its passes run only then.
//
// Every pointer is device memory; work is enqueued on `stream`. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

std::size_t select_at_least_scratch_bytes(std::size_t n);
// out_idx / out_values: room for n entries.
void select_at_least(const float* a, std::size_t n, float threshold, std::uint32_t* out_idx,
                     float* out_values, std::uint32_t* count, void* scratch,
                     std::size_t scratch_bytes, cudaStream_t stream);

std::size_t select_sampled_scratch_bytes(std::size_t n, std::size_t k);
// out_idx / out_values: room for sampled_max(k) entries (at most n). 0 < k <= n < 2^31.
void select_sampled(const float* a, std::size_t n, std::size_t k, std::uint64_t key,
                    std::uint64_t stream_id, std::uint32_t* out_idx, float* out_values,
                    std::uint32_t* count, void* scratch, std::size_t scratch_bytes,
                    cudaStream_t stream);

}  // namespace sparq::cuda
