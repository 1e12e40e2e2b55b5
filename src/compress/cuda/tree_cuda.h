// The tree strategy's own kernels on a CUDA device (compress/device_tree.h), around the topk
// twin's messages (lbs_cuda.h): forming a = e + g in the residual, and applying the agreed
// global index set G. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "compress/cuda/lbs_cuda.h"

namespace sparq::cuda {

// e[i] = e[i] + g[i] (ErrorFeedback::accumulate's a = g + e, formed in the residual).
void add_into(float* e, const float* g, std::size_t n, cudaStream_t stream);

// dense[list.idx[j]] = kListedZero where it is 0, for j < k (Note [Listed zeros],
// compress/quant_math.h); nothing when the list failed validation.
void mark_listed_zeros(float* dense, std::size_t n, SparseDecoded list, std::size_t k,
                       cudaStream_t stream);

// values[j] = a[G.idx[j]] for j < k (0 when the message of G failed validation).
void gather_global(const float* a, std::size_t n, SparseDecoded global, std::size_t k,
                   float* values, cudaStream_t stream);

// After `bucket` was zeroed: bucket[G.idx[j]] = values[j] * inv_p (one rounded product, as
// the CPU's); own_decoded[G.idx[j]] = a[G.idx[j]] when own_decoded is set (zeroed before:
// the send history); then a[G.idx[j]] = 0 when `residual` (error feedback: applied in full).
void apply_global(float* bucket, std::size_t n, SparseDecoded global, std::size_t k,
                  const float* values, float inv_p, float* a, bool residual, float* own_decoded,
                  cudaStream_t stream);

}  // namespace sparq::cuda
