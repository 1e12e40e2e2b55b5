// qsgd (compress/qsgd.h) on a CUDA device, through the shared math of compress/quant_math.h
// (qsgd_code, rounding_uniform, the code packing): the CPU codec's message bytes for the same
// input and context. A chunk's norm is summed in double by one thread in element order, the
// CPU loop's order, so it is the same double and the same f32 norm; that serial sum is the
// slow part (a chunk of 512 values per thread). Every pointer is device memory; work is
// enqueued on `stream`. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

struct QsgdArgs {
  int levels = 7;                                         // s
  int bits = 4;                                           // code width, bit_width(2 s)
  std::size_t chunk = 512;                                // values per norm, a multiple of 8
  std::uint64_t key = 0, stream = 0, first_position = 0;  // the rounding draws (qsgd.cpp)
};

// g == nullptr: encodes x. Otherwise error feedback is fused: x = g + x (a), the message
// encodes a, and x = a - D(msg) (decode with alpha -1 added, as ErrorFeedback::encode).
void qsgd_encode(const float* g, float* x, std::size_t n, const QsgdArgs& args, std::uint8_t* msg,
                 cudaStream_t stream);

// out = alpha * D(msg) (add == false) or out += alpha * D(msg). With `bad`, the chunk norms
// are checked first, as terngrad_decode's scale (scaled_codes_cuda.h).
void qsgd_decode(const std::uint8_t* msg, std::size_t n, const QsgdArgs& args, float alpha,
                 bool add, float* out, cudaStream_t stream, std::uint32_t* bad = nullptr,
                 std::uint32_t* invalid = nullptr);

}  // namespace sparq::cuda
