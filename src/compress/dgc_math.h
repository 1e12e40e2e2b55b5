// dgc's per-element math (dgc.h), one definition for the CPU compressor and its CUDA twin
// (compress/cuda/dgc_cuda.h), so the momentum, the residual and hence the message bytes are
// the same bits on both sides.
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace sparq::compress {

// Momentum correction u = m u + s g. The fma is written out: left to themselves g++ (on FMA
// hosts) and nvcc may each contract m * u + s * g, but not necessarily around the same
// product. s * g is rounded first (exact when s == 1, i.e. without clipping).
SPARQ_HOST_DEVICE inline float dgc_momentum(float u, float g, float momentum, float scale) {
  return fmaf(momentum, u, scale * g);
}

// Local clipping: min(1, (clip_norm / sqrt(P)) / ||g||) from ||g||^2 (a fixed-partition sum,
// Note [Fixed-partition sums] in span_stats.h); 1 when clip_norm <= 0 or the norm is within.
SPARQ_HOST_DEVICE inline float dgc_clip_scale(double sum_squares, double clip_norm, int world) {
  if (!(clip_norm > 0.0)) return 1.0f;
  const double norm = sqrt(sum_squares);
  const double limit = clip_norm / sqrt(static_cast<double>(world));
  return norm > limit ? static_cast<float>(limit / norm) : 1.0f;
}

}  // namespace sparq::compress
