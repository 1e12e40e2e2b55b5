#include <cmath>

#include "compress/cuda/feedback_cuda.h"
#include "compress/cuda/grid.cuh"
#include "compress/cuda/scaled_codes_cuda.h"
#include "compress/cuda/span_stats_cuda.h"
#include "compress/cuda/verdict.cuh"
#include "compress/cuda/wire_bytes.cuh"
#include "compress/quant_math.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using compress::dequantize;
using compress::pack_code_group;
using compress::rounding_uniform;
using compress::sign_scale;
using compress::SpanStats;
using compress::StatTerm;
using compress::terngrad_code;
using compress::terngrad_scale;
using compress::unpack_code;
using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

// The scale is the message's first 4 bytes.
__device__ void store_scale(float s, std::uint8_t* msg) { store_f32(msg, s); }
__device__ float load_scale(const std::uint8_t* msg) { return load_f32(msg); }

// The scratch: the span stats' own, then the SpanStats result.
SpanStats* stats_slot(void* scratch, std::size_t n) {
  return reinterpret_cast<SpanStats*>(static_cast<std::uint8_t*>(scratch) +
                                      align_up(span_stats_scratch_bytes(n)));
}

__global__ void terngrad_scale_kernel(const SpanStats* stats, std::size_t n, double clip_sigma,
                                      std::uint8_t* msg) {
  store_scale(terngrad_scale(*stats, n, clip_sigma), msg);
}

__global__ void sign_scale_kernel(const SpanStats* stats, std::size_t n, bool rms,
                                  std::uint8_t* msg) {
  store_scale(sign_scale(*stats, n, rms), msg);
}

// One thread per group of 8 values: 8 two-bit codes in 2 bytes (terngrad.cpp's packing).
__global__ void terngrad_code_kernel(float* x, std::size_t n, TernGradArgs a, bool feedback,
                                     std::uint8_t* msg) {
  const float s = load_scale(msg);
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  const bool tiny = isinf(inv);
  const float f = -1.0f * s;  // the feedback's decode at alpha -1
  for (std::size_t t = first_index(); t < (n + 7) / 8; t += stride()) {
    const std::size_t i0 = 8 * t;
    const int count = n - i0 < 8 ? static_cast<int>(n - i0) : 8;
    std::uint8_t codes[8];
    for (int i = 0; i < count; ++i) {
      const float u = rounding_uniform(a.key, a.stream, a.first_position + i0 + i);
      codes[i] = terngrad_code(x[i0 + i], s, inv, tiny, u);
      if (feedback) x[i0 + i] = x[i0 + i] + dequantize(codes[i], 1.0f, f);
    }
    store_bytes(pack_code_group(codes, count, 2), (2 * count + 7) / 8, msg + 4 + 2 * t);
  }
}

// bad != null and *bad != 0 (the decodes below): a message that failed its scale check
// decodes as nothing.
__global__ void terngrad_decode_kernel(const std::uint8_t* msg, std::size_t n, float alpha,
                                       bool add, float* y, const std::uint32_t* bad) {
  const bool refused = bad != nullptr && *bad != kSparseValid;
  if (refused && add) return;
  const float f = alpha * load_scale(msg);
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const std::uint8_t byte = msg[4 + i / 4];  // four 2-bit codes per byte
    const float v =
        refused ? 0.0f : dequantize(unpack_code(byte, static_cast<int>(i % 4), 2), 1.0f, f);
    y[i] = add ? y[i] + v : v;
  }
}

// One thread per byte of 8 sign bits (bit b set when value 8j + b < 0).
__global__ void sign_bits_kernel(float* x, std::size_t n, bool feedback, std::uint8_t* msg) {
  const float s = -1.0f * load_scale(msg);  // the feedback's decode at alpha -1
  for (std::size_t j = first_index(); j < (n + 7) / 8; j += stride()) {
    std::uint8_t byte = 0;
    for (std::size_t b = 0; b < 8 && 8 * j + b < n; ++b) {
      const std::size_t i = 8 * j + b;
      const bool negative = x[i] < 0.0f;
      byte |= static_cast<std::uint8_t>(negative << b);
      if (feedback) x[i] = x[i] + (negative ? -s : s);
    }
    msg[4 + j] = byte;
  }
}

__global__ void sign_decode_kernel(const std::uint8_t* msg, std::size_t n, float alpha, bool add,
                                   float* y, const std::uint32_t* bad) {
  const bool refused = bad != nullptr && *bad != kSparseValid;
  if (refused && add) return;
  const float s = alpha * load_scale(msg);
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const float v = refused ? 0.0f : (((msg[4 + i / 8] >> (i % 8)) & 1u) ? -s : s);
    y[i] = add ? y[i] + v : v;
  }
}

}  // namespace

std::size_t scaled_codes_scratch_bytes(std::size_t n) {
  return align_up(span_stats_scratch_bytes(n)) + sizeof(SpanStats);
}

void terngrad_encode(const float* g, float* x, std::size_t n, const TernGradArgs& args,
                     std::uint8_t* msg, void* scratch, cudaStream_t stream) {
  if (n == 0) return;
  if (g != nullptr) accumulate_gradient(g, x, n, stream);
  SpanStats* stats = stats_slot(scratch, n);
  span_stats(x, n, StatTerm::kValue, StatTerm::kSquare, scratch, stats, stream);
  terngrad_scale_kernel<<<1, 1, 0, stream>>>(stats, n, args.clip_sigma, msg);
  CUDA_CHECK(cudaGetLastError());
  terngrad_code_kernel<<<grid_for((n + 7) / 8), kThreads, 0, stream>>>(x, n, args, g != nullptr,
                                                                       msg);
  CUDA_CHECK(cudaGetLastError());
}

void terngrad_decode(const std::uint8_t* msg, std::size_t n, float alpha, bool add, float* out,
                     cudaStream_t stream, std::uint32_t* bad, std::uint32_t* invalid) {
  if (n == 0) return;
  checked_scales_decode(msg, 1, bad, invalid, stream, [&] {
    terngrad_decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(msg, n, alpha, add, out, bad);
  });
}

void sign_encode(const float* g, float* x, std::size_t n, bool rms, std::uint8_t* msg,
                 void* scratch, cudaStream_t stream) {
  if (n == 0) return;
  if (g != nullptr) accumulate_gradient(g, x, n, stream);
  SpanStats* stats = stats_slot(scratch, n);
  span_stats(x, n, rms ? StatTerm::kSquare : StatTerm::kAbs, StatTerm::kNone, scratch, stats,
             stream);
  sign_scale_kernel<<<1, 1, 0, stream>>>(stats, n, rms, msg);
  CUDA_CHECK(cudaGetLastError());
  sign_bits_kernel<<<grid_for((n + 7) / 8), kThreads, 0, stream>>>(x, n, g != nullptr, msg);
  CUDA_CHECK(cudaGetLastError());
}

void sign_decode(const std::uint8_t* msg, std::size_t n, float alpha, bool add, float* out,
                 cudaStream_t stream, std::uint32_t* bad, std::uint32_t* invalid) {
  if (n == 0) return;
  checked_scales_decode(msg, 1, bad, invalid, stream, [&] {
    sign_decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(msg, n, alpha, add, out, bad);
  });
}

}  // namespace sparq::cuda
