// The validation verdict of a received message on the device (SparseInvalid, lbs_cuda.h),
// shared by the decoders that check what they decode (lbs_decode.cu, block_codec.cu, qsgd.cu,
// scaled_codes.cu; nvcc only): a scratch word `bad` starts at kSparseValid, the checks record the
// first reason any thread finds, the decode adds nothing when one was found, and the reason then
// goes to the caller's per-sender word `invalid` unless an earlier verdict is already there.
#pragma once

#include <cstdint>

#include "compress/cuda/grid.cuh"
#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/wire_bytes.cuh"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda::codec {

// Records `reason` unless a reason is already recorded (the order threads find them in does
// not matter: a message with any fault is refused).
__device__ inline void reject(std::uint32_t* bad, std::uint32_t reason) {
  atomicCAS(bad, std::uint32_t{kSparseValid}, reason);
}

// One thread: *invalid = *bad when *bad is a reason and *invalid is still valid.
__global__ inline void report_verdict_kernel(const std::uint32_t* bad, std::uint32_t* invalid) {
  if (*bad != kSparseValid && *invalid == kSparseValid) *invalid = *bad;
}

// The `count` f32 scales at the head of a message (qsgd's chunk norms, terngrad's and sign's
// scale) as check_message holds them on the CPU: a negative one fails (kSparseBadScale); NaN
// and infinity pass, as there (the trainer's non-finite guard sees them). *bad was zeroed.
__global__ inline void nonnegative_scales_kernel(const std::uint8_t* msg, std::size_t count,
                                                 std::uint32_t* bad) {
  for (std::size_t i = first_index(); i < count; i += stride()) {
    if (load_f32(msg + 4 * i) < 0.0f) reject(bad, kSparseBadScale);
  }
}

// A decode of a message whose first `scales` f32 values are scales: with `bad` (a scratch
// word), they are checked first (nonnegative_scales_kernel), `decode` launches the decode
// (which reads *bad), and the verdict goes to `invalid`.
template <typename Decode>
void checked_scales_decode(const std::uint8_t* msg, std::size_t scales, std::uint32_t* bad,
                           std::uint32_t* invalid, cudaStream_t stream, Decode decode) {
  if (bad != nullptr) {
    CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(std::uint32_t), stream));
    nonnegative_scales_kernel<<<grid_for(scales), kThreads, 0, stream>>>(msg, scales, bad);
  }
  decode();
  if (bad != nullptr && invalid != nullptr) {
    report_verdict_kernel<<<1, 1, 0, stream>>>(bad, invalid);
  }
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda::codec
