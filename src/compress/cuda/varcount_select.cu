// Selections whose count only the device knows (varcount_select_cuda.h).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/scatter_flagged.cuh"
#include "compress/cuda/topk_cuda.h"
#include "compress/cuda/varcount_select_cuda.h"
#include "compress/magnitude_key.h"
#include "compress/sampled_rule.h"
#include "compress/topk_select.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride; scatter_flagged.cuh

// The sampled selection's state, one word each.
enum State : int { kRank = 0, kDone = 1, kExact = 2, kThreshold = 3, kCount = 4, kWords = 8 };

using compress::abs_key;

// The compaction both selections end with: flags, an exclusive scan, a scatter.
struct Compaction {
  std::uint32_t* flags = nullptr;
  std::uint32_t* positions = nullptr;
  void* cub = nullptr;
  std::size_t cub_bytes = 0;
};
std::size_t scan_bytes(std::size_t n) {
  std::size_t bytes = 0;
  CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
                                    static_cast<std::uint32_t*>(nullptr), static_cast<int>(n)));
  return bytes;
}
std::size_t compaction_bytes(std::size_t n) {
  return align_up(4 * n) + align_up(4 * n) + align_up(scan_bytes(n));
}
Compaction compaction_at(std::uint8_t* base, std::size_t n) {
  Compaction c;
  c.flags = reinterpret_cast<std::uint32_t*>(base);
  c.positions = reinterpret_cast<std::uint32_t*>(base + align_up(4 * n));
  c.cub = base + 2 * align_up(4 * n);
  c.cub_bytes = scan_bytes(n);
  return c;
}

// flags[i] = |a[i]| >= t, t = `threshold` or, with `state`, the sampled threshold (and no
// entry at all when the rule ended exact).
__global__ void at_least_flags_kernel(const float* a, std::size_t n, std::uint32_t threshold,
                                      const std::uint32_t* state, std::uint32_t* flags) {
  const bool none = state != nullptr && state[kExact] != 0;
  const std::uint32_t t = state != nullptr ? state[kThreshold] : threshold;
  for (std::size_t i = first_index(); i < n; i += stride()) {
    flags[i] = !none && abs_key(a[i]) >= t;
  }
}

// *count = the compaction's total (unless the sampled rule ended exact).
__global__ void total_kernel(std::size_t n, const std::uint32_t* flags,
                             const std::uint32_t* positions, const std::uint32_t* state,
                             std::uint32_t* count) {
  if (state != nullptr && state[kExact] != 0) return;
  *count = n == 0 ? 0 : positions[n - 1] + flags[n - 1];
}

void compact(const float* a, std::size_t n, std::uint32_t threshold, const std::uint32_t* state,
             const Compaction& c, std::uint32_t* out_idx, float* out_values, std::uint32_t* count,
             cudaStream_t stream) {
  at_least_flags_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, n, threshold, state, c.flags);
  std::size_t cub_bytes = c.cub_bytes;
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(c.cub, cub_bytes, c.flags, c.positions,
                                           static_cast<int>(n), stream));
  scatter_flagged_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, n, nullptr, c.flags, c.positions,
                                                               out_idx, out_values);
  total_kernel<<<1, 1, 0, stream>>>(n, c.flags, c.positions, state, count);
  CUDA_CHECK(cudaGetLastError());
}

// The sampled rule (compress/sampled_rule.h) on the device.
__global__ void sample_kernel(const float* a, std::size_t n, std::size_t s, std::uint64_t key,
                              std::uint64_t stream_id, std::uint32_t* keys) {
  for (std::size_t j = first_index(); j < s; j += stride()) {
    keys[j] = abs_key(a[compress::sampled_position(n, key, stream_id, j)]);
  }
}
__global__ void init_kernel(std::uint32_t* state, std::uint32_t first_rank) {
  for (int w = 0; w < kWords; ++w) state[w] = 0;
  state[kRank] = first_rank;
}
// This round's threshold: the rank-th largest sampled magnitude.
__global__ void pick_kernel(const std::uint32_t* sorted, std::uint32_t* state) {
  if (state[kDone] != 0) return;
  state[kThreshold] = sorted[state[kRank] - 1];
  state[kCount] = 0;
}
__global__ void count_kernel(const float* a, std::size_t n, std::uint32_t* state) {
  if (state[kDone] != 0) return;
  const std::uint32_t t = state[kThreshold];
  std::uint32_t mine = 0;
  for (std::size_t i = first_index(); i < n; i += stride()) mine += abs_key(a[i]) >= t;
  // One add per warp, not per thread: the grid gives a thread about one entry, and a threshold
  // that keeps most of the bucket (a key of 0 keeps every entry) would serialise n adds on
  // one word. Every lane is here (the loop has ended), so the full mask holds.
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0 && mine != 0) {
    atomicAdd(&state[kCount], mine);  // integers: the order does not matter
  }
}
__global__ void decide_kernel(std::uint32_t* state, std::size_t k, std::size_t s, std::size_t lo,
                              std::size_t hi) {
  if (state[kDone] != 0) return;
  const std::size_t count = state[kCount], rank = state[kRank];
  if (count >= lo && count <= hi) {
    state[kDone] = 1;
  } else if (count > hi || rank == s) {  // too many, or the sample is spent: exact
    state[kDone] = 1;
    state[kExact] = 1;
  } else {
    state[kRank] = static_cast<std::uint32_t>(compress::sampled_next_rank(rank, k, count, s));
  }
}
__global__ void exhausted_kernel(std::uint32_t* state) {
  if (state[kDone] == 0) state[kExact] = 1;  // every attempt kept too few
}
// The exact selection, where the rule ended exact.
__global__ void take_exact_kernel(const std::uint32_t* exact_idx, const float* exact_values,
                                  std::size_t k, const std::uint32_t* state, std::uint32_t* out_idx,
                                  float* out_values, std::uint32_t* count) {
  if (state != nullptr && state[kExact] == 0) return;
  for (std::size_t j = first_index(); j < k; j += stride()) {
    out_idx[j] = exact_idx[j];
    if (out_values != nullptr) out_values[j] = exact_values[j];
  }
  if (first_index() == 0) *count = static_cast<std::uint32_t>(k);
}

// Scratch of select_sampled: the sample and its sorted copy, the sort's storage, the state,
// the compaction, the exact selection's output and topk_exact's own scratch.
struct SampledLayout {
  std::size_t s = 0, keys = 0, sorted = 0, sort = 0, sort_bytes = 0, state = 0, compaction = 0,
              exact_idx = 0, exact_values = 0, topk = 0, total = 0;
};
SampledLayout sampled_layout(std::size_t n, std::size_t k) {
  SampledLayout l;
  l.s = compress::sampled_size(n, k);
  CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(
      nullptr, l.sort_bytes, static_cast<const std::uint32_t*>(nullptr),
      static_cast<std::uint32_t*>(nullptr), static_cast<int>(l.s)));
  l.sorted = align_up(l.keys + 4 * l.s);
  l.sort = align_up(l.sorted + 4 * l.s);
  l.state = align_up(l.sort + l.sort_bytes);
  l.compaction = align_up(l.state + 4 * kWords);
  l.exact_idx = align_up(l.compaction + compaction_bytes(n));
  l.exact_values = align_up(l.exact_idx + 4 * k);
  l.topk = align_up(l.exact_values + 4 * k);
  l.total = l.topk + topk_scratch_bytes(n);
  return l;
}

}  // namespace

std::size_t select_at_least_scratch_bytes(std::size_t n) { return compaction_bytes(n); }

void select_at_least(const float* a, std::size_t n, float threshold, std::uint32_t* out_idx,
                     float* out_values, std::uint32_t* count, void* scratch,
                     std::size_t scratch_bytes, cudaStream_t stream) {
  if (n >= (std::size_t{1} << 31) || scratch_bytes < compaction_bytes(n)) {
    fatal_error(__FILE__, __LINE__, "cuda at-least selection: n >= 2^31 or scratch too small");
  }
  compact(a, n, abs_key(threshold), nullptr,
          compaction_at(static_cast<std::uint8_t*>(scratch), n), out_idx, out_values, count,
          stream);
}

std::size_t select_sampled_scratch_bytes(std::size_t n, std::size_t k) {
  return sampled_layout(n, k).total;
}

void select_sampled(const float* a, std::size_t n, std::size_t k, std::uint64_t key,
                    std::uint64_t stream_id, std::uint32_t* out_idx, float* out_values,
                    std::uint32_t* count, void* scratch, std::size_t scratch_bytes,
                    cudaStream_t stream) {
  if (k == 0 || k > n || n >= (std::size_t{1} << 31)) {
    fatal_error(__FILE__, __LINE__, "cuda sampled selection: needs 0 < k <= n < 2^31");
  }
  const SampledLayout l = sampled_layout(n, k);
  if (scratch_bytes < l.total)
    fatal_error(__FILE__, __LINE__, "cuda sampled selection: scratch too small");
  auto* base = static_cast<std::uint8_t*>(scratch);
  auto* exact_idx = reinterpret_cast<std::uint32_t*>(base + l.exact_idx);
  auto* exact_values = reinterpret_cast<float*>(base + l.exact_values);
  if (k == n) {  // TopkSelector::sampled is exact there
    topk_exact(a, n, k, exact_idx, exact_values, base + l.topk, scratch_bytes - l.topk, stream);
    take_exact_kernel<<<grid_for(k), kThreads, 0, stream>>>(exact_idx, exact_values, k, nullptr,
                                                            out_idx, out_values, count);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  auto* keys = reinterpret_cast<std::uint32_t*>(base + l.keys);
  auto* sorted = reinterpret_cast<std::uint32_t*>(base + l.sorted);
  auto* state = reinterpret_cast<std::uint32_t*>(base + l.state);
  sample_kernel<<<grid_for(l.s), kThreads, 0, stream>>>(a, n, l.s, key, stream_id, keys);
  std::size_t sort_bytes = l.sort_bytes;
  CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(base + l.sort, sort_bytes, keys, sorted,
                                                      static_cast<int>(l.s), 0, 32, stream));
  init_kernel<<<1, 1, 0, stream>>>(
      state, static_cast<std::uint32_t>(compress::sampled_first_rank(n, k, l.s)));
  const std::size_t lo = compress::TopkSelector::sampled_min(k);
  const std::size_t hi = compress::TopkSelector::sampled_max(k);
  for (int attempt = 0; attempt < compress::kSampledAttempts; ++attempt) {
    pick_kernel<<<1, 1, 0, stream>>>(sorted, state);
    count_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, n, state);
    decide_kernel<<<1, 1, 0, stream>>>(state, k, l.s, lo, hi);
  }
  exhausted_kernel<<<1, 1, 0, stream>>>(state);
  // The exact top-k runs only where the rule ended exact.
  topk_exact_if(state + kExact, a, n, k, exact_idx, exact_values, base + l.topk,
                scratch_bytes - l.topk, stream);
  compact(a, n, 0, state, compaction_at(base + l.compaction, n), out_idx, out_values, count,
          stream);
  take_exact_kernel<<<grid_for(k), kThreads, 0, stream>>>(exact_idx, exact_values, k, state,
                                                          out_idx, out_values, count);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
