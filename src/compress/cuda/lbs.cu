// lbs and topk encoding on the device (lbs_cuda.h): selection, the index coding, the values,
// error feedback fused. Decoding is lbs_decode.cu.
#include <cub/device/device_scan.cuh>

#include "compress/cuda/block_codec_cuda.h"
#include "compress/cuda/grid.cuh"
#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/lbs_shared.cuh"
#include "compress/cuda/topk_cuda.h"
#include "compress/cuda/varcount_select_cuda.h"
#include "compress/cuda/wire_bytes.cuh"
#include "compress/sparse_bound.h"
#include "compress/topk_select.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride
using lbs_detail::kept_value;
using lbs_detail::kHeaderBytes;
using lbs_detail::run_bytes;

// Scratch layout (256-byte aligned parts): kept indices, kept values, varint lengths and
// offsets (k each: the most entries a message keeps), the value offset and kept count
// scalars, CUB's scan storage, then the selection's own scratch (top-k's by default).
struct Layout {
  std::size_t idx = 0, values = 0, lengths = 0, offsets = 0, value_offset = 0, count = 0,
              cub = 0, cub_bytes = 0, topk = 0, total = 0;
};

Layout layout_for(std::size_t n, std::size_t k, std::size_t select_bytes) {
  Layout l;
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, l.cub_bytes,
                                           static_cast<const std::uint32_t*>(nullptr),
                                           static_cast<std::uint32_t*>(nullptr),
                                           static_cast<int>(k)));
  l.values = align_up(l.idx + 4 * k);
  l.lengths = align_up(l.values + 4 * k);
  l.offsets = align_up(l.lengths + 4 * k);
  l.value_offset = align_up(l.offsets + 4 * k);
  l.count = align_up(l.value_offset + 4);
  l.cub = align_up(l.count + 4);
  l.topk = align_up(l.cub + l.cub_bytes);
  l.total = l.topk + select_bytes;
  return l;
}
Layout layout_for(std::size_t n, std::size_t k) { return layout_for(n, k, topk_scratch_bytes(n)); }

// The kept count: k, or (a selection whose count only the device knows) *count <= k.
__device__ std::size_t kept(std::size_t k, const std::uint32_t* count) {
  return count != nullptr ? *count : k;
}

// byte_io.h's varint_size and the gap before kept entry j (sparse_format.h).
__device__ std::uint32_t varint_size(std::uint32_t v) {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}
__device__ std::uint32_t gap(const std::uint32_t* idx, std::size_t j) {
  return j == 0 ? idx[0] : idx[j] - idx[j - 1] - 1;
}

__global__ void accumulate_kernel(const float* g, float* e, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += stride()) e[i] = e[i] + g[i];
}

// Lengths past the kept count are 0, so that the scan's last entry still ends the section.
__global__ void varint_lengths_kernel(const std::uint32_t* idx, std::size_t k,
                                      const std::uint32_t* count, std::uint32_t* lengths) {
  const std::size_t kk = kept(k, count);
  for (std::size_t j = first_index(); j < k; j += stride()) {
    lengths[j] = j < kk ? varint_size(gap(idx, j)) : 0;
  }
}

// plan_indices + the header of write_sparse_prefix: the smaller coding, ties to delta varint.
__global__ void header_kernel(std::size_t n, std::size_t k, const std::uint32_t* count, int bits,
                              const std::uint32_t* lengths, const std::uint32_t* offsets,
                              std::uint8_t* out, std::uint32_t* value_offset) {
  const std::uint64_t varint = static_cast<std::uint64_t>(offsets[k - 1]) + lengths[k - 1];
  const std::uint64_t bitmap = (n + 7) / 8;
  const bool use_bitmap = bitmap < varint;
  const auto index_bytes = static_cast<std::uint32_t>(use_bitmap ? bitmap : varint);
  store_u32(out, static_cast<std::uint32_t>(kept(k, count)));
  store_u32(out + 4, index_bytes);
  out[8] = use_bitmap ? 1 : 0;
  out[9] = static_cast<std::uint8_t>(bits);
  out[10] = 0;
  out[11] = 0;
  *value_offset = static_cast<std::uint32_t>(kHeaderBytes) + index_bytes;
}

// The index section, in the coding the header chose. Bitmap: zeroed by one kernel, bits set
// by the next (integer OR on aligned words: the result does not depend on their order).
__global__ void varint_kernel(const std::uint32_t* idx, std::size_t k,
                              const std::uint32_t* count, const std::uint32_t* offsets,
                              std::uint8_t* out) {
  if (out[8] != 0) return;
  std::uint8_t* section = out + kHeaderBytes;
  for (std::size_t j = first_index(); j < kept(k, count); j += stride()) {
    std::uint8_t* p = section + offsets[j];
    std::uint32_t v = gap(idx, j);
    while (v >= 0x80) {
      *p++ = static_cast<std::uint8_t>(v | 0x80);
      v >>= 7;
    }
    *p = static_cast<std::uint8_t>(v);
  }
}
__global__ void bitmap_clear_kernel(std::size_t n, std::uint8_t* out) {
  if (out[8] != 1) return;
  for (std::size_t b = first_index(); b < (n + 7) / 8; b += stride()) out[kHeaderBytes + b] = 0;
}
__global__ void bitmap_set_kernel(const std::uint32_t* idx, std::size_t k,
                                  const std::uint32_t* count, std::uint8_t* out) {
  if (out[8] != 1) return;
  // The section starts 12 bytes into a 4-aligned buffer: its words are aligned too. A word
  // may reach past the section into the value run, which is written afterwards.
  auto* words = reinterpret_cast<unsigned int*>(out + kHeaderBytes);
  for (std::size_t j = first_index(); j < kept(k, count); j += stride()) {
    atomicOr(&words[idx[j] / 32], 1u << (idx[j] % 32));
  }
}

// topk's value section: the kept values as little-endian f32 (sparse_format.h).
__global__ void f32_values_kernel(const float* values, std::size_t k, const std::uint32_t* count,
                                  const std::uint32_t* value_offset, std::uint8_t* out) {
  std::uint8_t* section = out + *value_offset;
  for (std::size_t j = first_index(); j < kept(k, count); j += stride()) {
    store_f32(section + 4 * j, values[j]);
  }
}
// e = a - D(m) at the kept positions: a - a, which is 0 whichever way it is rounded.
__global__ void f32_feedback_kernel(const std::uint32_t* idx, const float* values,
                                    std::size_t k, const std::uint32_t* count, float* e) {
  for (std::size_t j = first_index(); j < kept(k, count); j += stride()) {
    e[idx[j]] = __fadd_rn(e[idx[j]], __fmul_rn(-1.0f, values[j]));
  }
}

// e[idx[j]] = a - D(m) as the CPU forms it: the value decoded alone (alpha = -1), then added.
__global__ void feedback_kernel(const std::uint8_t* out, const std::uint32_t* value_offset,
                                const std::uint32_t* idx, std::size_t k,
                                const std::uint32_t* count, int bits, std::size_t block,
                                float* e) {
  const std::uint8_t* run = out + *value_offset;
  const std::size_t kk = kept(k, count);
  for (std::size_t j = first_index(); j < kk; j += stride()) {
    e[idx[j]] = __fadd_rn(e[idx[j]], kept_value(run, kk, j, bits, block, -1.0f));
  }
}

// The selection's scratch: top-k's, or the count-on-device selection's.
std::size_t select_bytes(std::size_t n, const SparseSelection* sel) {
  if (sel == nullptr) return topk_scratch_bytes(n);
  return sel->sampled ? select_sampled_scratch_bytes(n, sel->k) : select_at_least_scratch_bytes(n);
}

// Selection, index coding and the values of either codec (f32: topk), error feedback fused.
// `sel` null: exactly k entries (top-k). Otherwise at most k, their count on the device.
void encode_sparse(const float* g, float* e, std::size_t n, std::size_t k, bool f32,
                   const LbsArgs& args, std::uint8_t* out, void* scratch,
                   std::size_t scratch_bytes, cudaStream_t stream,
                   const SparseSelection* sel = nullptr) {
  if (k == 0 || k > n || n >= (std::size_t{1} << 31)) {
    fatal_error(__FILE__, __LINE__, "cuda sparse codec: needs 0 < k <= n < 2^31");
  }
  if (reinterpret_cast<std::uintptr_t>(out) % 4 != 0) {
    fatal_error(__FILE__, __LINE__, "cuda sparse codec: the message buffer must be 4-byte aligned");
  }
  const Layout l = layout_for(n, k, select_bytes(n, sel));
  if (scratch_bytes < l.total) fatal_error(__FILE__, __LINE__, "cuda sparse codec: scratch too small");
  auto* base = static_cast<std::uint8_t*>(scratch);
  auto* idx = reinterpret_cast<std::uint32_t*>(base + l.idx);
  auto* values = reinterpret_cast<float*>(base + l.values);
  auto* lengths = reinterpret_cast<std::uint32_t*>(base + l.lengths);
  auto* offsets = reinterpret_cast<std::uint32_t*>(base + l.offsets);
  auto* value_offset = reinterpret_cast<std::uint32_t*>(base + l.value_offset);
  auto* count = sel != nullptr ? reinterpret_cast<std::uint32_t*>(base + l.count) : nullptr;
  std::size_t cub_bytes = l.cub_bytes;

  if (g != nullptr) accumulate_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, e, n);
  if (sel == nullptr) {
    topk_exact(e, n, k, idx, values, base + l.topk, scratch_bytes - l.topk, stream);
  } else if (sel->sampled) {
    select_sampled(e, n, sel->k, sel->key, sel->stream, idx, values, count, base + l.topk,
                   scratch_bytes - l.topk, stream);
  } else {
    select_at_least(e, n, sel->threshold, idx, values, count, base + l.topk,
                    scratch_bytes - l.topk, stream);
  }
  varint_lengths_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, k, count, lengths);
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(base + l.cub, cub_bytes, lengths, offsets,
                                           static_cast<int>(k), stream));
  header_kernel<<<1, 1, 0, stream>>>(n, k, count, f32 ? 32 : args.bits, lengths, offsets, out,
                                     value_offset);
  varint_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, k, count, offsets, out);
  bitmap_clear_kernel<<<grid_for((n + 7) / 8), kThreads, 0, stream>>>(n, out);
  bitmap_set_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, k, count, out);
  if (f32) {
    f32_values_kernel<<<grid_for(k), kThreads, 0, stream>>>(values, k, count, value_offset, out);
    if (g != nullptr) {
      f32_feedback_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, values, k, count, e);
    }
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  CUDA_CHECK(cudaGetLastError());
  BlockCodecArgs codec{args.bits,  args.block,          args.stochastic, args.key,
                       args.stream, args.first_position, idx,             value_offset, count};
  blockquant_encode_run(values, k, codec, out, stream);
  if (g != nullptr) {
    feedback_kernel<<<grid_for(k), kThreads, 0, stream>>>(out, value_offset, idx, k, count,
                                                          args.bits, args.block, e);
    CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

std::size_t lbs_capacity(std::size_t n, std::size_t k, const LbsArgs& args) {
  // The index section's bound (sparse_bound.h); 4 bytes of slack for the bitmap's last word.
  return kHeaderBytes + compress::sparse_index_bound(n, k) + run_bytes(k, args) + 4;
}

std::size_t lbs_scratch_bytes(std::size_t n, std::size_t k) { return layout_for(n, k).total; }

const std::uint32_t* sparse_kept_indices(const void* scratch) {
  static_assert(Layout{}.idx == 0, "the kept indices lead the scratch whatever n and k");
  return static_cast<const std::uint32_t*>(scratch);
}

void lbs_encode(const float* g, float* e, std::size_t n, std::size_t k, const LbsArgs& args,
                std::uint8_t* out, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream) {
  encode_sparse(g, e, n, k, /*f32=*/false, args, out, scratch, scratch_bytes, stream);
}

std::size_t topk_capacity(std::size_t n, std::size_t k) {
  return kHeaderBytes + compress::sparse_index_bound(n, k) + 4 * k + 4;
}

void topk_encode(const float* g, float* e, std::size_t n, std::size_t k, std::uint8_t* out,
                 void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  encode_sparse(g, e, n, k, /*f32=*/true, LbsArgs{}, out, scratch, scratch_bytes, stream);
}

std::size_t sparse_max_count(std::size_t n, const SparseSelection& sel) {
  if (!sel.sampled) return n;
  const std::size_t hi = compress::TopkSelector::sampled_max(sel.k);
  return sel.k >= n ? n : (hi < n ? hi : n);
}

std::size_t sparse_selected_scratch_bytes(std::size_t n, const SparseSelection& sel) {
  const std::size_t most = sparse_max_count(n, sel);
  const std::size_t enc = layout_for(n, most, select_bytes(n, &sel)).total;
  const std::size_t dec = lbs_decode_scratch_bytes(n, most);
  return enc > dec ? enc : dec;
}

void topk_encode_selected(const float* g, float* e, std::size_t n, const SparseSelection& sel,
                          std::uint8_t* out, void* scratch, std::size_t scratch_bytes,
                          cudaStream_t stream) {
  encode_sparse(g, e, n, sparse_max_count(n, sel), /*f32=*/true, LbsArgs{}, out, scratch,
                scratch_bytes, stream, &sel);
}

void lbs_encode_selected(const float* g, float* e, std::size_t n, const SparseSelection& sel,
                         const LbsArgs& args, std::uint8_t* out, void* scratch,
                         std::size_t scratch_bytes, cudaStream_t stream) {
  encode_sparse(g, e, n, sparse_max_count(n, sel), /*f32=*/false, args, out, scratch,
                scratch_bytes, stream, &sel);
}

}  // namespace sparq::cuda
