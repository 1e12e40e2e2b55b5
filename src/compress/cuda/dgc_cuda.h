// dgc's own steps on a CUDA device (compress/dgc.h), around the topk twin's selection and
// message (lbs_cuda.h): the momentum correction u = m u + s g with the clipping scale s taken
// from the device's fixed-partition norm, and the momentum masking at the kept indices. The
// arithmetic is compress/dgc_math.h's, shared with the CPU. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "compress/span_stats.h"

namespace sparq::cuda {

struct DgcArgs {
  float momentum = 0.9f;
  double clip_norm = 0.0;  // <= 0: no clipping
  int world = 1;
};

// u[i] = m u[i] + s g[i], s = dgc_clip_scale(norm_sq->sum_a, ...) (norm_sq: device memory,
// ||g||^2 by span_stats; ignored without clipping).
void dgc_momentum(const float* g, float* u, std::size_t n, const DgcArgs& args,
                  const compress::SpanStats* norm_sq, cudaStream_t stream);

// u[idx[j]] = 0 for j < k.
void dgc_mask(float* u, const std::uint32_t* idx, std::size_t k, cudaStream_t stream);

}  // namespace sparq::cuda
