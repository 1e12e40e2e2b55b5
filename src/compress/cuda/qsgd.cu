#include <cmath>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/qsgd_cuda.h"
#include "compress/cuda/verdict.cuh"
#include "compress/cuda/wire_bytes.cuh"
#include "compress/quant_math.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

using compress::dequantize;
using compress::dequantize_add;
using compress::pack_code_group;
using compress::qsgd_code;
using compress::rounding_uniform;
using compress::unpack_code;
using namespace codec;  // grid.cuh: kThreads, grid_for, first_index, stride

__device__ float load_norm(const std::uint8_t* msg, std::size_t chunk) {
  return load_f32(msg + 4 * chunk);
}

std::size_t chunks_of(std::size_t n, std::size_t chunk) { return (n + chunk - 1) / chunk; }

// One thread per chunk: a = g + x written back (with feedback), and the chunk's norm from a
// double sum in element order, as qsgd.cpp's loop.
__global__ void norm_kernel(const float* g, float* x, std::size_t n, std::size_t chunk,
                            std::uint8_t* msg) {
  const std::size_t chunks = (n + chunk - 1) / chunk;
  for (std::size_t ch = first_index(); ch < chunks; ch += stride()) {
    const std::size_t begin = ch * chunk, end = begin + chunk < n ? begin + chunk : n;
    double sq = 0.0;
    for (std::size_t i = begin; i < end; ++i) {
      float v = x[i];
      if (g != nullptr) {
        v = g[i] + v;
        x[i] = v;
      }
      sq += static_cast<double>(v) * v;
    }
    const float norm = compress::qsgd_chunk_norm(sq);
    store_f32(msg + 4 * ch, norm);
  }
}

// One thread per group of 8 codes (a chunk holds whole groups): the codes, packed into the
// group's `bits` bytes; with feedback, x = a - D(msg) for the group's values.
__global__ void code_kernel(float* x, std::size_t n, QsgdArgs a, bool feedback, std::uint8_t* msg) {
  const std::size_t groups = (n + 7) / 8;
  std::uint8_t* codes_out = msg + 4 * ((n + a.chunk - 1) / a.chunk);
  const float s = static_cast<float>(a.levels);
  for (std::size_t t = first_index(); t < groups; t += stride()) {
    const std::size_t i0 = 8 * t;
    const int count = n - i0 < 8 ? static_cast<int>(n - i0) : 8;
    const float norm = load_norm(msg, i0 / a.chunk);
    const float ratio = norm > 0.0f ? s / norm : 0.0f;
    const bool tiny_norm = isinf(ratio);
    const float f = -1.0f * norm / s;  // the feedback's decode at alpha -1
    std::uint8_t codes[8];
    for (int i = 0; i < count; ++i) {
      const float u = rounding_uniform(a.key, a.stream, a.first_position + i0 + i);
      codes[i] = qsgd_code(x[i0 + i], ratio, tiny_norm, norm, s, u);
      if (feedback)
        x[i0 + i] = dequantize_add(x[i0 + i], codes[i], s, f);  // Note [Fused decode-add]
    }
    store_bytes(pack_code_group(codes, count, a.bits), (count * a.bits + 7) / 8,
                codes_out + t * a.bits);
  }
}

// bad != null and *bad != 0: a message that failed its check decodes as nothing.
__global__ void decode_kernel(const std::uint8_t* msg, std::size_t n, QsgdArgs a, float alpha,
                              bool add, float* y, const std::uint32_t* bad) {
  const bool refused = bad != nullptr && *bad != kSparseValid;
  if (refused && add) return;
  const std::uint8_t* codes_in = msg + 4 * ((n + a.chunk - 1) / a.chunk);
  const float s = static_cast<float>(a.levels);
  for (std::size_t i = first_index(); i < n; i += stride()) {
    const float f = alpha * load_norm(msg, i / a.chunk) / s;
    const std::size_t t = i / 8;
    const int count = n - 8 * t < 8 ? static_cast<int>(n - 8 * t) : 8;
    const std::uint64_t word = load_bytes(codes_in + t * a.bits, (count * a.bits + 7) / 8);
    const std::uint8_t code = unpack_code(word, static_cast<int>(i % 8), a.bits);
    // Note [Fused decode-add] (quant_math.h); a refused kAdd returned above.
    y[i] = add ? dequantize_add(y[i], code, s, f) : (refused ? 0.0f : dequantize(code, s, f));
  }
}

}  // namespace

void qsgd_encode(const float* g, float* x, std::size_t n, const QsgdArgs& args, std::uint8_t* msg,
                 cudaStream_t stream) {
  if (n == 0) return;
  norm_kernel<<<grid_for(chunks_of(n, args.chunk)), kThreads, 0, stream>>>(g, x, n, args.chunk,
                                                                           msg);
  CUDA_CHECK(cudaGetLastError());
  code_kernel<<<grid_for((n + 7) / 8), kThreads, 0, stream>>>(x, n, args, g != nullptr, msg);
  CUDA_CHECK(cudaGetLastError());
}

void qsgd_decode(const std::uint8_t* msg, std::size_t n, const QsgdArgs& args, float alpha,
                 bool add, float* out, cudaStream_t stream, std::uint32_t* bad,
                 std::uint32_t* invalid) {
  if (n == 0) return;
  checked_scales_decode(msg, chunks_of(n, args.chunk), bad, invalid, stream, [&] {
    decode_kernel<<<grid_for(n), kThreads, 0, stream>>>(msg, n, args, alpha, add, out, bad);
  });
}

}  // namespace sparq::cuda
