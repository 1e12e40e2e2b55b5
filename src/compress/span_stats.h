// SpanStats: the sums and the largest magnitude some compressors scale their messages by
// (terngrad: the mean, the variance and max |a|; signsgd: mean |a|; onebit: the RMS), in an
// order that a GPU reproduces bit for bit.
//
// Note [Fixed-partition sums]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A span is cut into chunks of kStatChunk values. Within a chunk, value i goes into lane
// i % kStatLanes (double accumulators, each summed in element order), the lanes are added in
// lane order, then the chunk's tail (its last len % kStatLanes values) in element order; the
// chunk partials are added in chunk order, starting from 0. The partition depends on n only,
// never on the thread count, so the result is the same bits on any number of threads (ops::sum
// is not: it splits by threads), and the CUDA twin (compress/cuda/span_stats_cuda.h) adds
// the same doubles in the same order: one thread per (chunk, lane), one per chunk, one for
// the total. A term is exact in double (a float, its magnitude, or a product of two floats),
// so fused multiply-adds cannot change it. The maximum is order-free.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace sparq::compress {

constexpr std::size_t kStatChunk = 4096;
constexpr std::size_t kStatLanes = 16;

enum class StatTerm : std::uint8_t { kNone, kValue, kAbs, kSquare };

SPARQ_HOST_DEVICE inline double stat_term(float x, StatTerm term) {
  switch (term) {
    case StatTerm::kValue:
      return static_cast<double>(x);
    case StatTerm::kAbs:
      return static_cast<double>(fabsf(x));
    case StatTerm::kSquare:
      return static_cast<double>(x) * x;
    case StatTerm::kNone:
      break;
  }
  return 0.0;
}

struct SpanStats {
  double sum_a = 0.0, sum_b = 0.0;  // the sums of term a and term b over the span
  float max_abs = 0.0f;             // fmax over |x|: NaN is ignored, as std::fmax does
};

// The scales made of them, one definition for the CPU codecs and their CUDA twins.
// terngrad (terngrad.h), stats of (value, square): s = min(max |a|, clip_sigma * sigma), sigma
// the span's standard deviation (a variance below the rounding of its sums, negative or NaN
// counts as 0), except that a span
// with no spread (one value, or all equal: sigma = 0) takes s = max |a|. Clipping at
// clip_sigma * sigma exists to cut outliers; at sigma = 0 it cut everything, so such a span
// (a 1-float tail bucket, a two_phase region of one float) never sent anything and its
// residual grew without bound.
SPARQ_HOST_DEVICE inline float terngrad_scale(const SpanStats& stats, std::size_t n,
                                              double clip_sigma) {
  const double mean = stats.sum_a / static_cast<double>(n);
  // One explicit fma: nvcc would fuse `sum_b / n - mean * mean` and g++ only on an FMA host
  // with -march=native, so written out it gives the same bits in every build.
  const double mean_square = stats.sum_b / static_cast<double>(n);
  const double raw_var = fma(-mean, mean, mean_square);
  // A variance within the sums' rounding of E[a^2] is no spread: 1000 floats of 1.7 left
  // 4.4e-16 here, clip 5.3e-8, and the span was sent as 5.3e-8 (review, 2026-12-06). Such a
  // span takes max |a| as any span without spread does. The rounding depth is the fixed
  // partition's, not n: a lane adds kStatChunk / kStatLanes values, a chunk its kStatLanes
  // lanes, the span its n / kStatChunk chunks (an n-fold bound swallowed real spread of
  // 3e-5 relative at n = 1e6: second review, 2026-12-06).
  const double depth = static_cast<double>(kStatChunk / kStatLanes + kStatLanes + n / kStatChunk);
  const double rounding = 8.0 * depth * DBL_EPSILON * mean_square;
  const double var = raw_var > rounding ? raw_var : 0.0;
  const float clip = static_cast<float>(clip_sigma * sqrt(var));
  return var > 0.0 && clip < stats.max_abs ? clip : stats.max_abs;  // std::min(max_abs, clip)
}
// signsgd (stats of |a|): mean |a|; onebit (stats of a^2): the RMS (sign.h).
SPARQ_HOST_DEVICE inline float sign_scale(const SpanStats& stats, std::size_t n, bool rms) {
  const double mean = stats.sum_a / static_cast<double>(n);
  return static_cast<float>(rms ? sqrt(mean) : mean);
}

// Both sums and max |x| of x[0, n), by the fixed partition above (parallel over chunks).
SpanStats span_stats(const float* x, std::size_t n, StatTerm a, StatTerm b);

}  // namespace sparq::compress
