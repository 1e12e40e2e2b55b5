#include <cub/device/device_scan.cuh>

#include "compress/cuda/block_codec_cuda.h"
#include "compress/cuda/grid.cuh"
#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/topk_cuda.h"
#include "compress/cuda/wire_bytes.cuh"
#include "compress/quant_math.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride
constexpr std::size_t kHeaderBytes = 12;  // sparse_format.h

// Scratch layout (256-byte aligned parts): kept indices, kept values, varint lengths and
// offsets (k each), the value offset scalar, CUB's scan storage, then top-k's own scratch.
struct Layout {
  std::size_t idx = 0, values = 0, lengths = 0, offsets = 0, value_offset = 0, cub = 0,
              cub_bytes = 0, topk = 0, total = 0;
};


Layout layout_for(std::size_t n, std::size_t k) {
  Layout l;
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, l.cub_bytes,
                                           static_cast<const std::uint32_t*>(nullptr),
                                           static_cast<std::uint32_t*>(nullptr),
                                           static_cast<int>(k)));
  l.values = align_up(l.idx + 4 * k);
  l.lengths = align_up(l.values + 4 * k);
  l.offsets = align_up(l.lengths + 4 * k);
  l.value_offset = align_up(l.offsets + 4 * k);
  l.cub = align_up(l.value_offset + 4);
  l.topk = align_up(l.cub + l.cub_bytes);
  l.total = l.topk + topk_scratch_bytes(n);
  return l;
}

// Decoding's scratch: flags and positions over n, indices and varint steps over k, the
// validation verdict (a SparseInvalid).
struct DecodeLayout {
  std::size_t flags = 0, pos = 0, idx = 0, steps = 0, bad = 0, cub = 0, cub_bytes = 0,
              total = 0;
};

DecodeLayout decode_layout_for(std::size_t n, std::size_t k) {
  DecodeLayout l;
  std::size_t exclusive = 0, inclusive = 0;
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, exclusive,
                                           static_cast<const std::uint32_t*>(nullptr),
                                           static_cast<std::uint32_t*>(nullptr),
                                           static_cast<int>(n)));
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, inclusive,
                                           static_cast<const std::uint32_t*>(nullptr),
                                           static_cast<std::uint32_t*>(nullptr),
                                           static_cast<int>(k)));
  l.cub_bytes = exclusive > inclusive ? exclusive : inclusive;
  l.pos = align_up(l.flags + 4 * n);
  l.idx = align_up(l.pos + 4 * n);
  l.steps = align_up(l.idx + 4 * k);
  l.bad = align_up(l.steps + 4 * k);
  l.cub = align_up(l.bad + 4);
  l.total = l.cub + align_up(l.cub_bytes);
  return l;
}

std::size_t run_bytes(std::size_t count, const LbsArgs& a) {
  return 2 * ((count + a.block - 1) / a.block) + (count * static_cast<std::size_t>(a.bits) + 7) / 8;
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

__global__ void varint_lengths_kernel(const std::uint32_t* idx, std::size_t k,
                                      std::uint32_t* lengths) {
  for (std::size_t j = first_index(); j < k; j += stride()) lengths[j] = varint_size(gap(idx, j));
}

// plan_indices + the header of write_sparse_prefix: the smaller coding, ties to delta varint.
__global__ void header_kernel(std::size_t n, std::size_t k, int bits,
                              const std::uint32_t* lengths, const std::uint32_t* offsets,
                              std::uint8_t* out, std::uint32_t* value_offset) {
  const std::uint64_t varint = static_cast<std::uint64_t>(offsets[k - 1]) + lengths[k - 1];
  const std::uint64_t bitmap = (n + 7) / 8;
  const bool use_bitmap = bitmap < varint;
  const auto index_bytes = static_cast<std::uint32_t>(use_bitmap ? bitmap : varint);
  store_u32(out, static_cast<std::uint32_t>(k));
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
                              const std::uint32_t* offsets, std::uint8_t* out) {
  if (out[8] != 0) return;
  std::uint8_t* section = out + kHeaderBytes;
  for (std::size_t j = first_index(); j < k; j += stride()) {
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
__global__ void bitmap_set_kernel(const std::uint32_t* idx, std::size_t k, std::uint8_t* out) {
  if (out[8] != 1) return;
  // The section starts 12 bytes into a 4-aligned buffer: its words are aligned too. A word
  // may reach past the section into the value run, which is written afterwards.
  auto* words = reinterpret_cast<unsigned int*>(out + kHeaderBytes);
  for (std::size_t j = first_index(); j < k; j += stride()) {
    atomicOr(&words[idx[j] / 32], 1u << (idx[j] % 32));
  }
}

// topk's value section: the kept values as little-endian f32 (sparse_format.h).
__global__ void f32_values_kernel(const float* values, std::size_t k,
                                  const std::uint32_t* value_offset, std::uint8_t* out) {
  std::uint8_t* section = out + *value_offset;
  for (std::size_t j = first_index(); j < k; j += stride()) {
    const std::uint32_t bits = __float_as_uint(values[j]);
    for (int b = 0; b < 4; ++b) section[4 * j + b] = static_cast<std::uint8_t>(bits >> (8 * b));
  }
}
// e = a - D(m) at the kept positions: a - a, which is 0 whichever way it is rounded.
__global__ void f32_feedback_kernel(const std::uint32_t* idx, const float* values,
                                    std::size_t k, float* e) {
  for (std::size_t j = first_index(); j < k; j += stride()) {
    e[idx[j]] = __fadd_rn(e[idx[j]], __fmul_rn(-1.0f, values[j]));
  }
}
// out[idx[j]] += alpha * v_j: decode_sparse_f32's `out[i] += alpha * v`, which g++ contracts
// into one fma where the CPU has FMA (-march=native), as here.
__global__ void f32_scatter_kernel(const std::uint8_t* in, std::size_t k, float alpha,
                                   const std::uint32_t* idx, float* out,
                                   const std::uint32_t* bad) {
  if (*bad != 0) return;  // a message that failed validation adds nothing
  const std::uint8_t* section = in + kHeaderBytes + load_u32(in + 4);
  for (std::size_t j = first_index(); j < k; j += stride()) {
    const float v = __uint_as_float(load_u32(section + 4 * j));
    out[idx[j]] = __fmaf_rn(alpha, v, out[idx[j]]);
  }
}

// alpha * D(m) of kept entry j, as the CPU's blockquant_decode_run (kSet) forms it: one
// product, which __fmul_rn keeps nvcc from fusing into the caller's sum.
__device__ float kept_value(const std::uint8_t* run, std::size_t k, std::size_t j, int bits,
                            std::size_t block, float alpha) {
  const std::size_t nblocks = (k + block - 1) / block;
  const std::size_t blk = j / block;
  const auto scale_bits = static_cast<std::uint16_t>(
      run[2 * blk] | (static_cast<std::uint16_t>(run[2 * blk + 1]) << 8));
  const float f = alpha * float_of_half_bits(scale_bits);
  // Code j: lane j % 8 of the group of 8 (the last one partial) at byte j / 8 * bits.
  const std::size_t first = j / 8 * 8;
  const int in_group = static_cast<int>(k - first < 8 ? k - first : 8);
  const std::uint8_t* group = run + 2 * nblocks + j / 8 * static_cast<std::size_t>(bits);
  std::uint64_t word = 0;
  for (int b = 0; b < (in_group * bits + 7) / 8; ++b) {
    word |= static_cast<std::uint64_t>(group[b]) << (8 * b);
  }
  const std::uint8_t code = compress::unpack_code(word, static_cast<int>(j % 8), bits);
  return __fmul_rn(static_cast<float>(code) - compress::quant_levels(bits), f);
}

// e[idx[j]] = a - D(m) as the CPU forms it: the value decoded alone (alpha = -1), then added.
__global__ void feedback_kernel(const std::uint8_t* out, const std::uint32_t* value_offset,
                                const std::uint32_t* idx, std::size_t k, int bits,
                                std::size_t block, float* e) {
  const std::uint8_t* run = out + *value_offset;
  for (std::size_t j = first_index(); j < k; j += stride()) {
    e[idx[j]] = __fadd_rn(e[idx[j]], kept_value(run, k, j, bits, block, -1.0f));
  }
}

// Validation (lbs_cuda.h): the first failure's reason stays.
__device__ void reject(std::uint32_t* bad, std::uint32_t reason) { atomicCAS(bad, 0u, reason); }

// The header against what the receiver knows (sparse_format.h's check_sparse_prefix). The
// index section may not exceed the bitmap's size: the capacity every message fits in.
__global__ void header_check_kernel(const std::uint8_t* in, std::size_t n, std::size_t k,
                                    int value_bits, std::uint32_t* bad) {
  const std::uint32_t index_bytes = load_u32(in + 4);
  const std::size_t bitmap_bytes = (n + 7) / 8;
  const bool ok = load_u32(in) == k && in[8] <= 1 && in[9] == value_bits &&
                  (in[8] == 1 ? index_bytes == bitmap_bytes : index_bytes <= bitmap_bytes);
  *bad = ok ? kSparseValid : kSparseBadHeader;
}

// Decoding: which bytes (varint) or bits (bitmap) of the index section end an index.
__device__ bool bitmap_bit(const std::uint8_t* section, std::size_t i) {
  return (section[i / 8] >> (i % 8)) & 1u;
}
__global__ void index_flags_kernel(const std::uint8_t* in, std::size_t n, std::uint32_t* flags,
                                   const std::uint32_t* bad) {
  if (*bad != kSparseValid) return;
  const bool bitmap = in[8] == 1;
  const std::uint32_t index_bytes = load_u32(in + 4);
  const std::uint8_t* section = in + kHeaderBytes;
  for (std::size_t i = first_index(); i < n; i += stride()) {
    flags[i] = bitmap ? bitmap_bit(section, i) : (i < index_bytes && (section[i] & 0x80u) == 0);
  }
}
// Exactly k indices (so every pos below is < k), no bitmap bit past n, and a varint section
// that ends with a varint's last byte.
__global__ void count_check_kernel(const std::uint8_t* in, std::size_t n, std::size_t k,
                                   const std::uint32_t* flags, const std::uint32_t* pos,
                                   std::uint32_t* bad) {
  if (*bad != kSparseValid) return;
  const std::uint8_t* section = in + kHeaderBytes;
  if (pos[n - 1] + flags[n - 1] != k) {
    reject(bad, kSparseBadCount);
  } else if (in[8] == 1 && n % 8 != 0 && (section[n / 8] >> (n % 8)) != 0) {
    reject(bad, kSparseBadCount);
  } else if (in[8] == 0 && load_u32(in + 4) > 0 &&
             (section[load_u32(in + 4) - 1] & 0x80u) != 0) {
    reject(bad, kSparseBadIndices);
  }
}

// Bitmap: idx[pos[i]] = i. Varint: the varint ending at byte b is number pos[b]; its gap + 1
// goes to steps[pos[b]], whose inclusive prefix sum minus one is the index (sparse_format.h).
__global__ void place_indices_kernel(const std::uint8_t* in, std::size_t n,
                                     const std::uint32_t* flags, const std::uint32_t* pos,
                                     std::uint32_t* idx, std::uint32_t* steps,
                                     std::uint32_t* bad) {
  if (*bad != kSparseValid) return;
  const bool bitmap = in[8] == 1;
  const std::uint8_t* section = in + kHeaderBytes;
  for (std::size_t i = first_index(); i < n; i += stride()) {
    if (!flags[i]) continue;
    if (bitmap) {
      idx[pos[i]] = static_cast<std::uint32_t>(i);
      continue;
    }
    std::size_t start = i;
    while (start > 0 && (section[start - 1] & 0x80u) != 0) --start;
    // At most 5 bytes, as byte_io.h's get_varint reads them (it drops a fifth byte's bits
    // past 32 alike).
    if (i - start >= 5) {
      reject(bad, kSparseBadIndices);
      continue;
    }
    std::uint32_t gap = 0;
    for (std::size_t b = start; b <= i; ++b) gap |= (section[b] & 0x7fu) << (7 * (b - start));
    steps[pos[i]] = gap + 1;
  }
}
// idx[j] = sums[j] - 1, each in range and above the one before (a prefix sum that wrapped
// around would not be).
__global__ void varint_indices_kernel(const std::uint8_t* in, std::size_t n, std::size_t k,
                                      const std::uint32_t* sums, std::uint32_t* idx,
                                      std::uint32_t* bad) {
  if (in[8] == 1 || *bad != kSparseValid) return;
  for (std::size_t j = first_index(); j < k; j += stride()) {
    idx[j] = sums[j] - 1;
    if (sums[j] == 0 || sums[j] - 1 >= n || (j > 0 && sums[j] <= sums[j - 1])) {
      reject(bad, kSparseBadIndices);
    }
  }
}

__global__ void report_kernel(const std::uint32_t* bad, std::uint32_t* invalid) {
  if (*bad != kSparseValid && *invalid == kSparseValid) *invalid = *bad;
}
// out[idx[j]] += alpha * D(m)_j: the CPU's `out[i] += decoded[j]`, unfused.
__global__ void scatter_kernel(const std::uint8_t* in, std::size_t k, int bits,
                               std::size_t block, float alpha, const std::uint32_t* idx,
                               float* out, const std::uint32_t* bad) {
  if (*bad != 0) return;  // a message that failed validation adds nothing
  const std::uint8_t* run = in + kHeaderBytes + load_u32(in + 4);
  for (std::size_t j = first_index(); j < k; j += stride()) {
    out[idx[j]] = __fadd_rn(out[idx[j]], kept_value(run, k, j, bits, block, alpha));
  }
}

}  // namespace

std::size_t lbs_capacity(std::size_t n, std::size_t k, const LbsArgs& args) {
  // The index section is never larger than the bitmap; 4 bytes of slack for the bitmap's
  // last word.
  return kHeaderBytes + (n + 7) / 8 + run_bytes(k, args) + 4;
}

std::size_t lbs_scratch_bytes(std::size_t n, std::size_t k) { return layout_for(n, k).total; }

std::size_t lbs_decode_scratch_bytes(std::size_t n, std::size_t k) {
  return decode_layout_for(n, k).total;
}

namespace {

// The index section of either coding into idx (both codecs), then the values: topk's f32
// (f32 == true) or lbs's block-coded run.
void decode_sparse(const std::uint8_t* in, std::size_t n, std::size_t k, bool f32,
                   const LbsArgs& args, float alpha, bool add, float* out, void* scratch,
                   std::size_t scratch_bytes, cudaStream_t stream, std::uint32_t* invalid) {
  if (k == 0 || k > n || n >= (std::size_t{1} << 31)) {
    fatal_error(__FILE__, __LINE__, "cuda sparse codec: needs 0 < k <= n < 2^31");
  }
  const DecodeLayout l = decode_layout_for(n, k);
  if (scratch_bytes < l.total) fatal_error(__FILE__, __LINE__, "cuda sparse codec: scratch too small");
  auto* base = static_cast<std::uint8_t*>(scratch);
  auto* flags = reinterpret_cast<std::uint32_t*>(base + l.flags);
  auto* pos = reinterpret_cast<std::uint32_t*>(base + l.pos);
  auto* idx = reinterpret_cast<std::uint32_t*>(base + l.idx);
  auto* steps = reinterpret_cast<std::uint32_t*>(base + l.steps);
  auto* bad = reinterpret_cast<std::uint32_t*>(base + l.bad);
  std::size_t cub_bytes = l.cub_bytes;
  if (!add) CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(float), stream));
  // Every step after the header check skips a message already found bad; the scans then run
  // over stale flags and steps, harmlessly (their results are never used).
  header_check_kernel<<<1, 1, 0, stream>>>(in, n, k, f32 ? 32 : args.bits, bad);
  index_flags_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, n, flags, bad);
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(base + l.cub, cub_bytes, flags, pos,
                                           static_cast<int>(n), stream));
  count_check_kernel<<<1, 1, 0, stream>>>(in, n, k, flags, pos, bad);
  place_indices_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, n, flags, pos, idx, steps,
                                                              bad);
  // Varint only (the bitmap placed idx directly; its steps are unused): prefix sums of gap + 1.
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(base + l.cub, cub_bytes, steps, pos,
                                           static_cast<int>(k), stream));
  varint_indices_kernel<<<grid_for(k), kThreads, 0, stream>>>(in, n, k, pos, idx, bad);
  if (f32) {
    f32_scatter_kernel<<<grid_for(k), kThreads, 0, stream>>>(in, k, alpha, idx, out, bad);
  } else {
    scatter_kernel<<<grid_for(k), kThreads, 0, stream>>>(in, k, args.bits, args.block, alpha,
                                                          idx, out, bad);
  }
  if (invalid != nullptr) report_kernel<<<1, 1, 0, stream>>>(bad, invalid);
  CUDA_CHECK(cudaGetLastError());
}

// Selection, index coding and the values of either codec (f32: topk), error feedback fused.
void encode_sparse(const float* g, float* e, std::size_t n, std::size_t k, bool f32,
                   const LbsArgs& args, std::uint8_t* out, void* scratch,
                   std::size_t scratch_bytes, cudaStream_t stream) {
  if (k == 0 || k > n || n >= (std::size_t{1} << 31)) {
    fatal_error(__FILE__, __LINE__, "cuda sparse codec: needs 0 < k <= n < 2^31");
  }
  if (reinterpret_cast<std::uintptr_t>(out) % 4 != 0) {
    fatal_error(__FILE__, __LINE__, "cuda sparse codec: the message buffer must be 4-byte aligned");
  }
  const Layout l = layout_for(n, k);
  if (scratch_bytes < l.total) fatal_error(__FILE__, __LINE__, "cuda sparse codec: scratch too small");
  auto* base = static_cast<std::uint8_t*>(scratch);
  auto* idx = reinterpret_cast<std::uint32_t*>(base + l.idx);
  auto* values = reinterpret_cast<float*>(base + l.values);
  auto* lengths = reinterpret_cast<std::uint32_t*>(base + l.lengths);
  auto* offsets = reinterpret_cast<std::uint32_t*>(base + l.offsets);
  auto* value_offset = reinterpret_cast<std::uint32_t*>(base + l.value_offset);
  std::size_t cub_bytes = l.cub_bytes;

  if (g != nullptr) accumulate_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, e, n);
  topk_exact(e, n, k, idx, values, base + l.topk, scratch_bytes - l.topk, stream);
  varint_lengths_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, k, lengths);
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(base + l.cub, cub_bytes, lengths, offsets,
                                           static_cast<int>(k), stream));
  header_kernel<<<1, 1, 0, stream>>>(n, k, f32 ? 32 : args.bits, lengths, offsets, out,
                                     value_offset);
  varint_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, k, offsets, out);
  bitmap_clear_kernel<<<grid_for((n + 7) / 8), kThreads, 0, stream>>>(n, out);
  bitmap_set_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, k, out);
  if (f32) {
    f32_values_kernel<<<grid_for(k), kThreads, 0, stream>>>(values, k, value_offset, out);
    if (g != nullptr) f32_feedback_kernel<<<grid_for(k), kThreads, 0, stream>>>(idx, values, k, e);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  CUDA_CHECK(cudaGetLastError());
  BlockCodecArgs codec{args.bits,  args.block,          args.stochastic, args.key,
                       args.stream, args.first_position, idx,             value_offset};
  blockquant_encode_run(values, k, codec, out, stream);
  if (g != nullptr) {
    feedback_kernel<<<grid_for(k), kThreads, 0, stream>>>(out, value_offset, idx, k, args.bits,
                                                          args.block, e);
    CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void lbs_encode(const float* g, float* e, std::size_t n, std::size_t k, const LbsArgs& args,
                std::uint8_t* out, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream) {
  encode_sparse(g, e, n, k, /*f32=*/false, args, out, scratch, scratch_bytes, stream);
}

void lbs_decode(const std::uint8_t* in, std::size_t n, std::size_t k, const LbsArgs& args,
                float alpha, bool add, float* out, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream, std::uint32_t* invalid) {
  decode_sparse(in, n, k, /*f32=*/false, args, alpha, add, out, scratch, scratch_bytes, stream,
                invalid);
}

std::size_t topk_capacity(std::size_t n, std::size_t k) {
  return kHeaderBytes + (n + 7) / 8 + 4 * k + 4;
}

void topk_encode(const float* g, float* e, std::size_t n, std::size_t k, std::uint8_t* out,
                 void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  encode_sparse(g, e, n, k, /*f32=*/true, LbsArgs{}, out, scratch, scratch_bytes, stream);
}

void topk_decode(const std::uint8_t* in, std::size_t n, std::size_t k, float alpha, bool add,
                 float* out, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                 std::uint32_t* invalid) {
  decode_sparse(in, n, k, /*f32=*/true, LbsArgs{}, alpha, add, out, scratch, scratch_bytes,
                stream, invalid);
}

}  // namespace sparq::cuda
