#include <cub/device/device_scan.cuh>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/scatter_flagged.cuh"
#include "compress/cuda/topk_cuda.h"
#include "compress/magnitude_key.h"
#include "compress/radix_levels.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride; scatter_flagged.cuh
using compress::abs_key;
using compress::kRadixLevelCount;
using compress::kRadixMaxBins;
using compress::radix_bins;
using compress::radix_digit;
using compress::radix_extend;
using compress::radix_prefix;
constexpr int kFindThreads = 1024;
static_assert(radix_bins(kRadixLevelCount - 1) % kFindThreads == 0, "find_bin's chunks");
// Each histogram block zeroes and flushes its counters once: a capped grid (grid-stride) keeps
// that overhead small next to the elements it counts, and still fills the device.
constexpr unsigned int kHistogramBlocks = 512;

// Scratch layout (each part 256-byte aligned): the histogram, the selection state, three
// arrays of n u32 (flags, tie ranks, output positions) and CUB's scan storage.
struct Layout {
  std::size_t hist = 0, state = 0, flags = 0, ranks = 0, positions = 0, cub = 0, cub_bytes = 0,
              total = 0;
};


Layout layout_for(std::size_t n) {
  Layout l;
  std::size_t bytes = 0;
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
                                           static_cast<std::uint32_t*>(nullptr),
                                           static_cast<int>(n)));
  l.cub_bytes = bytes;
  l.hist = 0;
  l.state = align_up(l.hist + kRadixMaxBins * 4);
  l.flags = align_up(l.state + 4 * 4);
  l.ranks = align_up(l.flags + n * 4);
  l.positions = align_up(l.ranks + n * 4);
  l.cub = align_up(l.positions + n * 4);
  l.total = l.cub + align_up(l.cub_bytes);
  return l;
}

// Level `level`'s histogram (Note [Radix selection by levels on the device],
// compress/radix_levels.h) of the entries whose higher digits equal the prefix state[0] (all
// of them at level 0), added into hist. Each block counts in shared memory and adds its
// nonzero bins once; within a warp, the lanes that share a digit add once (a bucket's exact
// zeros, or any magnitude many entries share, would otherwise serialise on one counter).
__global__ void histogram_kernel(const float* a, std::size_t n, int level,
                                 const std::uint32_t* gate, const std::uint32_t* state,
                                 std::uint32_t* hist) {
  if (gated_off(gate)) return;  // a device word: the whole block returns or none of it
  __shared__ std::uint32_t counts[kRadixMaxBins];
  const std::uint32_t bins = radix_bins(level);
  for (std::uint32_t b = threadIdx.x; b < bins; b += blockDim.x) counts[b] = 0;
  __syncthreads();
  const std::uint32_t prefix = level == 0 ? 0u : state[0];
  const unsigned int lane = threadIdx.x % 32;
  // Whole warps step together (blockDim and the stride are multiples of 32), so every lane
  // of a warp reaches the vote.
  for (std::size_t base = first_index() - lane; base < n; base += stride()) {
    const std::size_t i = base + lane;
    const std::uint32_t key = i < n ? abs_key(a[i]) : 0u;
    const bool counted = i < n && radix_prefix(key, level) == prefix;
    const std::uint32_t digit = radix_digit(key, level);
    const unsigned int voters = __ballot_sync(0xffffffffu, counted);
    if (counted) {
      const unsigned int peers = __match_any_sync(voters, digit);
      if (lane == static_cast<unsigned int>(__ffs(peers) - 1)) {
        atomicAdd(&counts[digit], static_cast<std::uint32_t>(__popc(peers)));
      }
    }
  }
  __syncthreads();
  for (std::uint32_t b = threadIdx.x; b < bins; b += blockDim.x) {
    if (counts[b] != 0) atomicAdd(&hist[b], counts[b]);
  }
}

// The bin of level `level` holding the need-th largest entry, scanning from the top (the
// CPU's find_bin); need = k at level 0, else state[1]. It extends the prefix state[0] and
// leaves the rank left inside the bin in state[1]; at the last level the prefix is the
// threshold key, written to state[2], and the ties to take to state[3].
__global__ void find_bin_kernel(const std::uint32_t* hist, int level, std::uint32_t k,
                                const std::uint32_t* gate, std::uint32_t* state) {
  if (gated_off(gate)) return;
  __shared__ std::uint32_t chunk_sum[kFindThreads];
  const std::uint32_t per = radix_bins(level) / kFindThreads;
  std::uint32_t sum = 0;
  for (std::uint32_t b = 0; b < per; ++b) sum += hist[threadIdx.x * per + b];
  chunk_sum[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x != 0) return;
  std::uint32_t need = level == 0 ? k : state[1];
  for (int c = kFindThreads - 1; c >= 0; --c) {
    if (chunk_sum[c] < need) {
      need -= chunk_sum[c];
      continue;
    }
    for (int b = static_cast<int>(per) - 1; b >= 0; --b) {
      const std::uint32_t bin = static_cast<std::uint32_t>(c) * per + static_cast<std::uint32_t>(b);
      if (hist[bin] >= need) {
        const std::uint32_t chosen = radix_extend(level == 0 ? 0u : state[0], level, bin);
        if (level == kRadixLevelCount - 1) {
          state[2] = chosen;
          state[3] = need;
        } else {
          state[0] = chosen;
          state[1] = need;
        }
        return;
      }
      need -= hist[bin];
    }
  }
  // Unreachable when k <= n: level 0 counts n entries, and each later level the need-th.
  __trap();
}

__global__ void tie_flags_kernel(const float* a, std::size_t n, const std::uint32_t* gate,
                                 const std::uint32_t* state, std::uint32_t* flags) {
  if (gated_off(gate)) return;
  const std::uint32_t t = state[2];
  for (std::size_t i = first_index(); i < n; i += stride()) flags[i] = abs_key(a[i]) == t;
}

// Kept: above the threshold, or at it among the first `ties` (ranks: exclusive tie counts).
__global__ void keep_flags_kernel(const float* a, std::size_t n, const std::uint32_t* gate,
                                  const std::uint32_t* state, const std::uint32_t* ranks,
                                  std::uint32_t* flags) {
  if (gated_off(gate)) return;
  const std::uint32_t t = state[2], ties = state[3];
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const std::uint32_t key = abs_key(a[i]);
    flags[i] = key > t || (key == t && ranks[i] < ties);
  }
}

}  // namespace

std::size_t topk_scratch_bytes(std::size_t n) { return layout_for(n).total; }

void topk_exact(const float* a, std::size_t n, std::size_t k, std::uint32_t* out_idx,
                float* out_values, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream) {
  topk_exact_if(nullptr, a, n, k, out_idx, out_values, scratch, scratch_bytes, stream);
}

void topk_exact_if(const std::uint32_t* gate, const float* a, std::size_t n, std::size_t k,
                   std::uint32_t* out_idx, float* out_values, void* scratch,
                   std::size_t scratch_bytes, cudaStream_t stream) {
  if (k == 0 || k > n || n >= (std::size_t{1} << 31)) {
    fatal_error(__FILE__, __LINE__, "cuda top-k: needs 0 < k <= n < 2^31");
  }
  const Layout l = layout_for(n);
  if (scratch_bytes < l.total) fatal_error(__FILE__, __LINE__, "cuda top-k: scratch too small");
  auto* base = static_cast<std::uint8_t*>(scratch);
  auto* hist = reinterpret_cast<std::uint32_t*>(base + l.hist);
  auto* state = reinterpret_cast<std::uint32_t*>(base + l.state);
  auto* flags = reinterpret_cast<std::uint32_t*>(base + l.flags);
  auto* ranks = reinterpret_cast<std::uint32_t*>(base + l.ranks);
  auto* positions = reinterpret_cast<std::uint32_t*>(base + l.positions);
  void* cub_temp = base + l.cub;
  std::size_t cub_bytes = l.cub_bytes;
  const unsigned int grid = grid_for(n);
  const auto k32 = static_cast<std::uint32_t>(k);

  const unsigned int histogram_grid = grid < kHistogramBlocks ? grid : kHistogramBlocks;
  for (int level = 0; level < kRadixLevelCount; ++level) {
    CUDA_CHECK(cudaMemsetAsync(hist, 0, kRadixMaxBins * 4, stream));
    histogram_kernel<<<histogram_grid, kThreads, 0, stream>>>(a, n, level, gate, state, hist);
    find_bin_kernel<<<1, kFindThreads, 0, stream>>>(hist, level, k32, gate, state);
  }
  tie_flags_kernel<<<grid, kThreads, 0, stream>>>(a, n, gate, state, flags);
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(cub_temp, cub_bytes, flags, ranks,
                                           static_cast<int>(n), stream));
  keep_flags_kernel<<<grid, kThreads, 0, stream>>>(a, n, gate, state, ranks, flags);
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(cub_temp, cub_bytes, flags, positions,
                                           static_cast<int>(n), stream));
  scatter_flagged_kernel<<<grid, kThreads, 0, stream>>>(a, n, gate, flags, positions, out_idx,
                                                        out_values);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
