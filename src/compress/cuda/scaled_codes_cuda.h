// The compressors whose message is one f32 scale and a code per value, the scale computed
// from span-wide sums (compress/span_stats.h): terngrad (2-bit codes, stochastic) and the
// 1-bit signsgd and onebit (sign.h), on a CUDA device. The sums follow Note [Fixed-partition
// sums] and the scale is computed on the device by the shared formulas (terngrad_scale,
// sign_scale) and written into the message there, so the bytes are the CPU codec's and the
// host never waits. Every pointer is device memory; work is enqueued on `stream`. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

// Scratch an encode of n floats needs (either codec).
std::size_t scaled_codes_scratch_bytes(std::size_t n);

struct TernGradArgs {
  double clip_sigma = 2.5;
  std::uint64_t key = 0, stream = 0, first_position = 0;  // terngrad.cpp's rounding draws
};

// g == nullptr: encodes x. Otherwise error feedback is fused: x = g + x (a), the message
// encodes a, and x = a - D(msg) (ErrorFeedback::encode's decode at alpha -1, added).
void terngrad_encode(const float* g, float* x, std::size_t n, const TernGradArgs& args,
                     std::uint8_t* msg, void* scratch, cudaStream_t stream);
// out = alpha * D(msg) (add == false) or out += alpha * D(msg). With `bad` (a device scratch
// word), the scale is checked first as check_message checks it on the CPU (negative fails): a
// message that fails decodes as nothing (zeros, or no change when adding) and its reason
// (kSparseBadScale, lbs_cuda.h) goes to `invalid` unless that already holds one.
void terngrad_decode(const std::uint8_t* msg, std::size_t n, float alpha, bool add, float* out,
                     cudaStream_t stream, std::uint32_t* bad = nullptr,
                     std::uint32_t* invalid = nullptr);

// rms: onebit's scale (the RMS), else signsgd's (mean |a|). As terngrad_encode otherwise.
void sign_encode(const float* g, float* x, std::size_t n, bool rms, std::uint8_t* msg,
                 void* scratch, cudaStream_t stream);
void sign_decode(const std::uint8_t* msg, std::size_t n, float alpha, bool add, float* out,
                 cudaStream_t stream, std::uint32_t* bad = nullptr,
                 std::uint32_t* invalid = nullptr);

}  // namespace sparq::cuda
