#include "compress/cuda/block_codec_cuda.h"
#include "compress/cuda/grid.cuh"
#include "compress/cuda/verdict.cuh"
#include "compress/cuda/wire_bytes.cuh"
#include "compress/quant_math.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using compress::absmax_step;
using compress::block_scale_bits;
using compress::dequantize;
using compress::dequantize_add;
using compress::inverse_scale;
using compress::pack_code_group;
using compress::quant_levels;
using compress::quantize_nearest;
using compress::quantize_stochastic;
using compress::rounding_uniform;
using compress::unpack_code;

using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride
constexpr int kWarps = kThreads / 32;

__device__ float block_absmax(float m) {
  __shared__ float warp_max[kWarps];
  for (int offset = 16; offset > 0; offset /= 2) {
    m = absmax_step(m, __shfl_down_sync(0xffffffffu, m, offset));
  }
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  float all = 0.0f;
  for (int w = 0; w < kWarps; ++w) all = absmax_step(all, warp_max[w]);
  return all;
}

// One CUDA block per quantization block `blockIdx.x`. With g != nullptr the error feedback
// is fused: x = g + e is written back into e first, and e = x - D(m) at the end.
__global__ void encode_kernel(const float* g, float* x, std::size_t most, BlockCodecArgs a,
                              std::uint8_t* out) {
  if (a.out_offset != nullptr) out += *a.out_offset;
  const std::size_t count = a.count != nullptr ? *a.count : most;
  const std::size_t blk = blockIdx.x;
  const std::size_t begin = blk * a.block;
  if (begin >= count) return;  // the whole block: past a count the device chose
  const std::size_t len = count - begin < a.block ? count - begin : a.block;
  const float levels = quant_levels(a.bits);
  float m = 0.0f;
  for (std::size_t j = threadIdx.x; j < len; j += kThreads) {
    float v = x[begin + j];
    if (g != nullptr) {
      v = g[begin + j] + v;  // the CPU's accumulate: T(g) + e, g first
      x[begin + j] = v;
    }
    m = absmax_step(m, v);
  }
  const float absmax = block_absmax(m);  // synchronizes the block: every x is written
  const std::uint16_t scale_bits = block_scale_bits(absmax, levels);
  if (threadIdx.x == 0) store_bytes(scale_bits, 2, out + 2 * blk);
  const float scale = float_of_half_bits(scale_bits);
  const float inv = inverse_scale(scale);
  const std::size_t nblocks = (count + a.block - 1) / a.block;
  std::uint8_t* codes_out = out + 2 * nblocks;
  const std::size_t groups = (len + 7) / 8;
  for (std::size_t grp = threadIdx.x; grp < groups; grp += kThreads) {
    const std::size_t first = begin + 8 * grp;
    const int n = static_cast<int>(count - first < 8 ? count - first : 8);
    std::uint8_t codes[8];
    for (int i = 0; i < n; ++i) {
      const float v = x[first + i];
      if (a.stochastic) {
        const std::uint64_t pos =
            a.first_position + (a.positions ? a.positions[first + i] : first + i);
        codes[i] = quantize_stochastic(v, inv, levels, rounding_uniform(a.key, a.stream, pos));
      } else {
        codes[i] = quantize_nearest(v, inv, levels);
      }
      // e = a - D(m): the CPU decodes with alpha = -1 into the residual (kAdd).
      if (g != nullptr)
        x[first + i] = dequantize_add(x[first + i], codes[i], levels, -1.0f * scale);
    }
    store_bytes(pack_code_group(codes, n, a.bits), (n * a.bits + 7) / 8,
                codes_out + first / 8 * a.bits);
  }
}

// The run's scales as check_block_scales holds them (*bad was zeroed before).
__global__ void scale_check_kernel(const std::uint8_t* in, std::size_t nblocks,
                                   std::uint32_t* bad) {
  for (std::size_t b = first_index(); b < nblocks; b += stride()) {
    const auto bits = static_cast<std::uint16_t>(load_bytes(in + 2 * b, 2));
    if (!compress::block_scale_accepted(bits)) reject(bad, kSparseBadScale);
  }
}

// One thread per group of 8 codes (grid-stride). bad != null and *bad != 0: a run that
// failed its check decodes as nothing.
__global__ void decode_kernel(const std::uint8_t* in, std::size_t count, int bits,
                              std::size_t block, float alpha, bool add, float* out,
                              const std::uint32_t* bad) {
  const bool refused = bad != nullptr && *bad != kSparseValid;
  if (refused && add) return;
  const float levels = quant_levels(bits);
  const std::size_t nblocks = (count + block - 1) / block;
  const std::uint8_t* codes_in = in + 2 * nblocks;
  const std::size_t groups = (count + 7) / 8;
  for (std::size_t grp = first_index(); grp < groups; grp += stride()) {
    const std::size_t first = 8 * grp;
    const std::size_t blk = first / block;
    const float f = alpha * float_of_half_bits(static_cast<std::uint16_t>(load_bytes(in + 2 * blk, 2)));
    const int n = static_cast<int>(count - first < 8 ? count - first : 8);
    const std::uint64_t word = load_bytes(codes_in + first / 8 * bits, (n * bits + 7) / 8);
    for (int i = 0; i < n; ++i) {
      // Note [Fused decode-add] (quant_math.h): the sum is one fma, as on the CPU; a refused
      // run adds nothing (kAdd) or decodes as zeros (kSet).
      const std::uint8_t code = unpack_code(word, i, bits);
      if (add) {
        if (!refused) out[first + i] = dequantize_add(out[first + i], code, levels, f);
      } else {
        out[first + i] = refused ? 0.0f : dequantize(code, levels, f);
      }
    }
  }
}

void check_params(int bits, std::size_t block) {
  if (bits < 2 || bits > 8 || block == 0 || block % 8 != 0) {
    fatal_error(__FILE__, __LINE__,
                "cuda block codec: bits must be 2..8 and block a positive multiple of 8");
  }
}

void launch_encode(const float* g, float* x, std::size_t count, const BlockCodecArgs& args,
                   std::uint8_t* out, cudaStream_t stream) {
  check_params(args.bits, args.block);
  if (count == 0) return;
  const std::size_t nblocks = (count + args.block - 1) / args.block;
  if (nblocks >= (std::size_t{1} << 31)) {
    fatal_error(__FILE__, __LINE__, "cuda block codec: more than 2^31 quantization blocks");
  }
  encode_kernel<<<static_cast<unsigned int>(nblocks), kThreads, 0, stream>>>(g, x, count, args,
                                                                             out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void blockquant_encode_run(const float* v, std::size_t count, const BlockCodecArgs& args,
                           std::uint8_t* out, cudaStream_t stream) {
  // The kernel only reads x when g is null.
  launch_encode(nullptr, const_cast<float*>(v), count, args, out, stream);
}

void blockquant_encode_with_feedback(const float* g, float* e, std::size_t count,
                                     const BlockCodecArgs& args, std::uint8_t* out,
                                     cudaStream_t stream) {
  launch_encode(g, e, count, args, out, stream);
}

void blockquant_decode_run(const std::uint8_t* in, std::size_t count, int bits,
                           std::size_t block, float alpha, bool add, float* out,
                           cudaStream_t stream, std::uint32_t* bad, std::uint32_t* invalid) {
  check_params(bits, block);
  if (count == 0) return;
  if (bad != nullptr) {
    const std::size_t nblocks = (count + block - 1) / block;
    CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(std::uint32_t), stream));
    scale_check_kernel<<<grid_for(nblocks), kThreads, 0, stream>>>(in, nblocks, bad);
  }
  const std::size_t groups = (count + 7) / 8;
  decode_kernel<<<grid_for(groups), kThreads, 0, stream>>>(in, count, bits, block, alpha, add,
                                                          out, bad);
  if (bad != nullptr && invalid != nullptr) report_verdict_kernel<<<1, 1, 0, stream>>>(bad, invalid);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
