#include <cmath>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/span_stats_cuda.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using compress::kStatChunk;
using compress::kStatLanes;
using compress::SpanStats;
using compress::stat_term;
using compress::StatTerm;
using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

std::size_t chunks_of(std::size_t n) { return (n + kStatChunk - 1) / kStatChunk; }

// The scratch: per (chunk, lane) the lane's partials, then per chunk the chunk's.
struct Parts {
  SpanStats* lanes;
  SpanStats* chunks;
};
Parts parts_of(void* scratch, std::size_t n) {
  auto* base = static_cast<SpanStats*>(scratch);
  return {base, base + chunks_of(n) * kStatLanes};
}

__device__ std::size_t chunk_length(std::size_t n, std::size_t chunk) {
  const std::size_t begin = chunk * kStatChunk;
  return n - begin < kStatChunk ? n - begin : kStatChunk;
}

// Value i of the span: x[i], or the float x[i] + plus[i].
__device__ float value_at(const float* x, const float* plus, std::size_t i) {
  return plus != nullptr ? x[i] + plus[i] : x[i];
}

__global__ void lane_kernel(const float* x, const float* plus, std::size_t n, StatTerm a,
                            StatTerm b, SpanStats* lanes) {
  const std::size_t total = (n + kStatChunk - 1) / kStatChunk * kStatLanes;
  for (std::size_t t = first_index(); t < total; t += stride()) {
    const std::size_t chunk = t / kStatLanes, lane = t % kStatLanes;
    const std::size_t begin = chunk * kStatChunk;
    const std::size_t full = chunk_length(n, chunk) / kStatLanes * kStatLanes;
    SpanStats s;
    for (std::size_t i = lane; i < full; i += kStatLanes) {
      const float v = value_at(x, plus, begin + i);
      s.sum_a += stat_term(v, a);
      s.sum_b += stat_term(v, b);
      s.max_abs = fmaxf(s.max_abs, fabsf(v));
    }
    lanes[t] = s;
  }
}

__global__ void chunk_kernel(const float* x, const float* plus, std::size_t n, StatTerm a,
                             StatTerm b, const SpanStats* lanes, SpanStats* chunks) {
  const std::size_t count = (n + kStatChunk - 1) / kStatChunk;
  for (std::size_t chunk = first_index(); chunk < count; chunk += stride()) {
    SpanStats s;
    for (std::size_t l = 0; l < kStatLanes; ++l) {
      const SpanStats& lane = lanes[chunk * kStatLanes + l];
      s.sum_a += lane.sum_a;
      s.sum_b += lane.sum_b;
      s.max_abs = fmaxf(s.max_abs, lane.max_abs);
    }
    const std::size_t begin = chunk * kStatChunk, len = chunk_length(n, chunk);
    for (std::size_t i = len / kStatLanes * kStatLanes; i < len; ++i) {
      const float v = value_at(x, plus, begin + i);
      s.sum_a += stat_term(v, a);
      s.sum_b += stat_term(v, b);
      s.max_abs = fmaxf(s.max_abs, fabsf(v));
    }
    chunks[chunk] = s;
  }
}

__global__ void total_kernel(const SpanStats* chunks, std::size_t count, SpanStats* out) {
  SpanStats s;
  for (std::size_t c = 0; c < count; ++c) {
    s.sum_a += chunks[c].sum_a;
    s.sum_b += chunks[c].sum_b;
    s.max_abs = fmaxf(s.max_abs, chunks[c].max_abs);
  }
  *out = s;
}

}  // namespace

std::size_t span_stats_scratch_bytes(std::size_t n) {
  return chunks_of(n) * (kStatLanes + 1) * sizeof(SpanStats);
}

void span_stats(const float* x, std::size_t n, StatTerm a, StatTerm b, void* scratch,
                SpanStats* out, cudaStream_t stream, const float* plus) {
  const Parts p = parts_of(scratch, n);
  const std::size_t chunks = chunks_of(n);
  if (chunks > 0) {
    lane_kernel<<<grid_for(chunks * kStatLanes), kThreads, 0, stream>>>(x, plus, n, a, b,
                                                                         p.lanes);
    CUDA_CHECK(cudaGetLastError());
    chunk_kernel<<<grid_for(chunks), kThreads, 0, stream>>>(x, plus, n, a, b, p.lanes,
                                                             p.chunks);
    CUDA_CHECK(cudaGetLastError());
  }
  total_kernel<<<1, 1, 0, stream>>>(p.chunks, chunks, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
