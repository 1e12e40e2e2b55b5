// The last pass of a stream compaction, shared by the selections that end with one (exact
// top-k in topk.cu, the count-on-device selections in varcount_select.cu; nvcc only).
#pragma once

#include <cstddef>
#include <cstdint>

#include "compress/cuda/grid.cuh"

namespace sparq::cuda::codec {

// A pass given a gate (a device word written earlier on its stream) does nothing unless the
// gate is non-zero: work whose result only one branch of a device-side decision needs is
// enqueued without the host waiting for the decision. nullptr: no gate.
__device__ inline bool gated_off(const std::uint32_t* gate) {
  return gate != nullptr && *gate == 0;
}

// For every flagged i: out_idx[positions[i]] = i and, when out_values is given,
// out_values[positions[i]] = a[i]. `positions` is the exclusive scan of `flags`, so the kept
// entries land in ascending index order, the order the CPU's selections emit.
__global__ inline void scatter_flagged_kernel(const float* a, std::size_t n,
                                              const std::uint32_t* gate, const std::uint32_t* flags,
                                              const std::uint32_t* positions,
                                              std::uint32_t* out_idx, float* out_values) {
  if (gated_off(gate)) return;
  for (std::size_t i = first_index(); i < n; i += stride()) {
    if (!flags[i]) continue;
    out_idx[positions[i]] = static_cast<std::uint32_t>(i);
    if (out_values != nullptr) out_values[positions[i]] = a[i];
  }
}

}  // namespace sparq::cuda::codec
