#include "compress/span_stats.h"

#include <cmath>
#include <vector>

namespace sparq::compress {
namespace {

// One chunk's partials (Note [Fixed-partition sums]).
SpanStats chunk_stats(const float* x, std::size_t len, StatTerm a, StatTerm b) {
  double lanes_a[kStatLanes] = {}, lanes_b[kStatLanes] = {};
  float m = 0.0f;
  const std::size_t full = len / kStatLanes * kStatLanes;
  for (std::size_t i = 0; i < full; i += kStatLanes) {
    for (std::size_t l = 0; l < kStatLanes; ++l) {
      lanes_a[l] += stat_term(x[i + l], a);
      lanes_b[l] += stat_term(x[i + l], b);
      m = std::fmax(m, std::fabs(x[i + l]));
    }
  }
  SpanStats s;
  for (std::size_t l = 0; l < kStatLanes; ++l) {
    s.sum_a += lanes_a[l];
    s.sum_b += lanes_b[l];
  }
  for (std::size_t i = full; i < len; ++i) {
    s.sum_a += stat_term(x[i], a);
    s.sum_b += stat_term(x[i], b);
    m = std::fmax(m, std::fabs(x[i]));
  }
  s.max_abs = m;
  return s;
}

}  // namespace

SpanStats span_stats(const float* x, std::size_t n, StatTerm a, StatTerm b) {
  const std::size_t chunks = (n + kStatChunk - 1) / kStatChunk;
  std::vector<SpanStats> partial(chunks);
#pragma omp parallel for schedule(static) if (chunks > 4)
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t begin = c * kStatChunk;
    partial[c] = chunk_stats(x + begin, n - begin < kStatChunk ? n - begin : kStatChunk, a, b);
  }
  SpanStats total;
  for (const SpanStats& p : partial) {
    total.sum_a += p.sum_a;
    total.sum_b += p.sum_b;
    total.max_abs = std::fmax(total.max_abs, p.max_abs);
  }
  return total;
}

}  // namespace sparq::compress
