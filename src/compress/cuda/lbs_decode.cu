// lbs and topk decoding on the device (lbs_cuda.h): the index section of either coding by
// prefix sums, validated as it is read (SparseInvalid), then the values added at their
// positions. Encoding is lbs.cu.
#include <cub/device/device_scan.cuh>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/lbs_shared.cuh"
#include "compress/cuda/verdict.cuh"
#include "compress/cuda/wire_bytes.cuh"
#include "compress/quant_math.h"
#include "compress/sparse_bound.h"
#include "core/cuda/cuda_check.h"
#include "core/host_device.h"

namespace sparq::cuda {
namespace {

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride
using lbs_detail::kept_value;
using lbs_detail::kHeaderBytes;

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

// out[idx[j]] += alpha * v_j: decode_sparse_f32's mul_add (Note [Written-out multiply-adds],
// core/host_device.h).
__global__ void f32_scatter_kernel(const std::uint8_t* in, float alpha, const std::uint32_t* idx,
                                   float* out, const std::uint32_t* bad) {
  if (*bad != 0) return;  // a message that failed validation adds nothing
  const std::uint8_t* section = in + kHeaderBytes + load_u32(in + 4);
  const std::size_t count = load_u32(in);
  for (std::size_t j = first_index(); j < count; j += stride()) {
    const float v = load_f32(section + 4 * j);
    out[idx[j]] = mul_add(alpha, v, out[idx[j]]);
  }
}

// Validation (lbs_cuda.h): the first failure's reason stays.

// The header against what the receiver knows (sparse_format.h's check_sparse_prefix): a
// count of k entries, or between min_count and k for a count the sender's device chose. The
// index section may not exceed its bound (sparse_bound.h), which every encoder's message
// meets and the capacity holds, so nothing is read past a message's block.
__global__ void header_check_kernel(const std::uint8_t* in, std::size_t n, std::size_t min_count,
                                    std::size_t k, int value_bits, std::uint32_t* bad) {
  const std::uint32_t index_bytes = load_u32(in + 4);
  const std::size_t bitmap_bytes = (n + 7) / 8;
  const std::size_t count = load_u32(in);
  const bool ok = count >= min_count && count <= k && in[8] <= 1 && in[9] == value_bits &&
                  index_bytes <= compress::sparse_index_bound(n, count) &&
                  (in[8] == 1 ? index_bytes == bitmap_bytes : true);
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
// Exactly the header's count of indices (so every pos below is < k), no bitmap bit past n, and
// a varint section that ends with a varint's last byte.
__global__ void count_check_kernel(const std::uint8_t* in, std::size_t n,
                                   const std::uint32_t* flags, const std::uint32_t* pos,
                                   std::uint32_t* bad) {
  if (*bad != kSparseValid) return;
  const std::uint8_t* section = in + kHeaderBytes;
  if (pos[n - 1] + flags[n - 1] != load_u32(in)) {
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
    // At most 5 bytes, as byte_io.h's get_varint reads them (it drops a fifth byte's bits
    // past 32 alike). The walk back stops at a sixth byte: a damaged message of continuation
    // bytes would otherwise cost each of its terminators a walk over all of them.
    while (start > 0 && i - start < 5 && (section[start - 1] & 0x80u) != 0) --start;
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
__global__ void varint_indices_kernel(const std::uint8_t* in, std::size_t n,
                                      const std::uint32_t* sums, std::uint32_t* idx,
                                      std::uint32_t* bad) {
  if (in[8] == 1 || *bad != kSparseValid) return;
  const std::size_t count = load_u32(in);
  for (std::size_t j = first_index(); j < count; j += stride()) {
    idx[j] = sums[j] - 1;
    if (sums[j] == 0 || sums[j] - 1 >= n || (j > 0 && sums[j] <= sums[j - 1])) {
      reject(bad, kSparseBadIndices);
    }
  }
}

// lbs's block scales, as check_block_scales (block_codec.h) holds them: finite and
// non-negative, so a damaged scale cannot put an infinity or a NaN into the bucket.
__global__ void scale_check_kernel(const std::uint8_t* in, std::size_t block, std::uint32_t* bad) {
  if (*bad != kSparseValid) return;
  const std::uint8_t* run = in + kHeaderBytes + load_u32(in + 4);
  const std::size_t blocks = (load_u32(in) + block - 1) / block;
  for (std::size_t b = first_index(); b < blocks; b += stride()) {
    const auto bits = static_cast<std::uint16_t>(run[2 * b] | (run[2 * b + 1] << 8));
    if (!compress::block_scale_accepted(bits)) reject(bad, kSparseBadScale);
  }
}

// out[idx[j]] += alpha * D(m)_j: the CPU's `out[i] += decoded[j]`, unfused.
__global__ void scatter_kernel(const std::uint8_t* in, int bits, std::size_t block, float alpha,
                               const std::uint32_t* idx, float* out, const std::uint32_t* bad) {
  if (*bad != 0) return;  // a message that failed validation adds nothing
  const std::uint8_t* run = in + kHeaderBytes + load_u32(in + 4);
  const std::size_t count = load_u32(in);
  for (std::size_t j = first_index(); j < count; j += stride()) {
    out[idx[j]] = __fadd_rn(out[idx[j]], kept_value(run, count, j, bits, block, alpha));
  }
}

// The index section of either coding into idx (both codecs), then the values: topk's f32
// (f32 == true) or lbs's block-coded run. A message keeps between min_count and k entries
// (min_count == k: exactly k).
void decode_sparse(const std::uint8_t* in, std::size_t n, std::size_t min_count, std::size_t k,
                   bool f32, const LbsArgs& args, float alpha, bool add, float* out,
                   void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                   std::uint32_t* invalid) {
  if (k == 0 || k > n || min_count > k || n >= (std::size_t{1} << 31)) {
    fatal_error(__FILE__, __LINE__, "cuda sparse codec: needs min_count <= k, 0 < k <= n < 2^31");
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
  header_check_kernel<<<1, 1, 0, stream>>>(in, n, min_count, k, f32 ? 32 : args.bits, bad);
  index_flags_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, n, flags, bad);
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(base + l.cub, cub_bytes, flags, pos,
                                           static_cast<int>(n), stream));
  count_check_kernel<<<1, 1, 0, stream>>>(in, n, flags, pos, bad);
  place_indices_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, n, flags, pos, idx, steps,
                                                              bad);
  // Varint only (the bitmap placed idx directly; its steps are unused): prefix sums of gap + 1.
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(base + l.cub, cub_bytes, steps, pos,
                                           static_cast<int>(k), stream));
  varint_indices_kernel<<<grid_for(k), kThreads, 0, stream>>>(in, n, pos, idx, bad);
  if (!f32) {  // at most ceil(k / block) scales, inside the capacity the header check allowed
    scale_check_kernel<<<grid_for((k + args.block - 1) / args.block), kThreads, 0, stream>>>(
        in, args.block, bad);
  }
  if (f32) {
    f32_scatter_kernel<<<grid_for(k), kThreads, 0, stream>>>(in, alpha, idx, out, bad);
  } else {
    scatter_kernel<<<grid_for(k), kThreads, 0, stream>>>(in, args.bits, args.block, alpha, idx,
                                                          out, bad);
  }
  if (invalid != nullptr) report_verdict_kernel<<<1, 1, 0, stream>>>(bad, invalid);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::size_t lbs_decode_scratch_bytes(std::size_t n, std::size_t k) {
  return decode_layout_for(n, k).total;
}

SparseDecoded sparse_decoded(const void* scratch, std::size_t n, std::size_t k) {
  const DecodeLayout l = decode_layout_for(n, k);
  const auto* base = static_cast<const std::uint8_t*>(scratch);
  return {reinterpret_cast<const std::uint32_t*>(base + l.idx),
          reinterpret_cast<const std::uint32_t*>(base + l.bad)};
}

void lbs_decode(const std::uint8_t* in, std::size_t n, std::size_t k, const LbsArgs& args,
                float alpha, bool add, float* out, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream, std::uint32_t* invalid) {
  decode_sparse(in, n, k, k, /*f32=*/false, args, alpha, add, out, scratch, scratch_bytes, stream,
                invalid);
}

void topk_decode(const std::uint8_t* in, std::size_t n, std::size_t k, float alpha, bool add,
                 float* out, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                 std::uint32_t* invalid) {
  decode_sparse(in, n, k, k, /*f32=*/true, LbsArgs{}, alpha, add, out, scratch, scratch_bytes,
                stream, invalid);
}

void lbs_decode_counted(const std::uint8_t* in, std::size_t n, std::size_t min_count,
                        std::size_t max_count, const LbsArgs& args, float alpha, bool add,
                        float* out, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                        std::uint32_t* invalid) {
  decode_sparse(in, n, min_count, max_count, /*f32=*/false, args, alpha, add, out, scratch,
                scratch_bytes, stream, invalid);
}

void topk_decode_counted(const std::uint8_t* in, std::size_t n, std::size_t min_count,
                         std::size_t max_count, float alpha, bool add, float* out, void* scratch,
                         std::size_t scratch_bytes, cudaStream_t stream, std::uint32_t* invalid) {
  decode_sparse(in, n, min_count, max_count, /*f32=*/true, LbsArgs{}, alpha, add, out, scratch,
                scratch_bytes, stream, invalid);
}

}  // namespace sparq::cuda
