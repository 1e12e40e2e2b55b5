#include <cub/device/device_scan.cuh>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/scatter_flagged.cuh"
#include "compress/cuda/topk_cuda.h"
#include "compress/magnitude_key.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride; scatter_flagged.cuh
using compress::abs_key;
constexpr int kFindThreads = 1024;
constexpr std::uint32_t kBins = 1u << 16;

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
  l.state = align_up(l.hist + kBins * 4);
  l.flags = align_up(l.state + 4 * 4);
  l.ranks = align_up(l.flags + n * 4);
  l.positions = align_up(l.ranks + n * 4);
  l.cub = align_up(l.positions + n * 4);
  l.total = l.cub + align_up(l.cub_bytes);
  return l;
}

// Pass 1 (high = false): histogram of the top 15 bits. Pass 2: of the low 16 bits of the
// entries in the boundary bin state[0].
__global__ void histogram_kernel(const float* a, std::size_t n, bool low, const std::uint32_t* gate,
                                 const std::uint32_t* state, std::uint32_t* hist) {
  if (gated_off(gate)) return;
  const std::uint32_t high = low ? state[0] : 0;
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const std::uint32_t key = abs_key(a[i]);
    if (!low) {
      atomicAdd(&hist[key >> 16], 1u);
    } else if ((key >> 16) == high) {
      atomicAdd(&hist[key & 0xffffu], 1u);
    }
  }
}

// The bin holding the need-th largest entry, scanning `bins` bins from the top (the CPU's
// find_bin). Pass 1: need = k, writes state[0] = bin, state[1] = the rank left inside it.
// Pass 2: need = state[1], writes state[2] = threshold key, state[3] = ties to take.
__global__ void find_bin_kernel(const std::uint32_t* hist, std::uint32_t bins, bool low,
                                std::uint32_t k, const std::uint32_t* gate, std::uint32_t* state) {
  if (gated_off(gate)) return;
  __shared__ std::uint32_t chunk_sum[kFindThreads];
  const std::uint32_t per = bins / kFindThreads;
  std::uint32_t sum = 0;
  for (std::uint32_t b = 0; b < per; ++b) sum += hist[threadIdx.x * per + b];
  chunk_sum[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x != 0) return;
  std::uint32_t need = low ? state[1] : k;
  for (int c = kFindThreads - 1; c >= 0; --c) {
    if (chunk_sum[c] < need) {
      need -= chunk_sum[c];
      continue;
    }
    for (int b = static_cast<int>(per) - 1; b >= 0; --b) {
      const std::uint32_t bin = static_cast<std::uint32_t>(c) * per + static_cast<std::uint32_t>(b);
      if (hist[bin] >= need) {
        if (low) {
          state[2] = (state[0] << 16) | bin;
          state[3] = need;
        } else {
          state[0] = bin;
          state[1] = need;
        }
        return;
      }
      need -= hist[bin];
    }
  }
  // Unreachable when k <= n: the histogram holds n entries.
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

  CUDA_CHECK(cudaMemsetAsync(hist, 0, kBins * 4, stream));
  histogram_kernel<<<grid, kThreads, 0, stream>>>(a, n, false, gate, state, hist);
  find_bin_kernel<<<1, kFindThreads, 0, stream>>>(hist, kBins / 2, false, k32, gate, state);
  CUDA_CHECK(cudaMemsetAsync(hist, 0, kBins * 4, stream));
  histogram_kernel<<<grid, kThreads, 0, stream>>>(a, n, true, gate, state, hist);
  find_bin_kernel<<<1, kFindThreads, 0, stream>>>(hist, kBins, true, k32, gate, state);
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
