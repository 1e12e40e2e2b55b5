// The block codec (compress/block_codec.h) on a CUDA device: the same message bytes as the CPU
// codec for the same input and rounding draws (Note [Byte-identical block codes],
// compress/quant_math.h, whose per-element functions both sides call). Every pointer is device
// memory; work is enqueued on `stream` and nothing waits for it. fmt-free (nvcc compiles the
// .cu that defines these).
//
// Layout of a run (block_codec.h): ceil(count / block) little-endian f16 scales, then the
// b-bit codes packed 8 per b bytes. One CUDA block encodes one quantization block: its
// absmax is a block reduction (a maximum, so the order does not matter), then each thread
// quantizes and packs whole groups of 8 codes, which never straddle two quantization blocks
// (block is a multiple of 8), so no two threads write the same byte.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

struct BlockCodecArgs {
  int bits = 4;              // 2..8
  std::size_t block = 256;   // a multiple of 8
  bool stochastic = false;   // stochastic rounding with the draws below
  // compress::RoundingRng: value j's draw is Philox (key, stream) at first_position +
  // positions[j] (device array; null: first_position + j).
  std::uint64_t key = 0;
  std::uint64_t stream = 0;
  std::uint64_t first_position = 0;
  const std::uint32_t* positions = nullptr;
  // Device scalar added to `out` (lbs: the value run starts after an index section whose
  // size only the device knows); null: 0.
  const std::uint32_t* out_offset = nullptr;
  // Device scalar: the run holds this many values, at most `count` (lbs with a selection whose
  // count only the device knows); null: `count`.
  const std::uint32_t* count = nullptr;
};

// Encodes v[0..count) into out (block_scale_bytes + packed_code_bytes of count).
void blockquant_encode_run(const float* v, std::size_t count, const BlockCodecArgs& args,
                           std::uint8_t* out, cudaStream_t stream);

// Error feedback fused with the encode, in one pass over the bucket: a = g + e is formed in
// e, encoded into out, and e = a - D(out) is left behind (the CPU's ErrorFeedback::encode with
// the blockquant compressor, value for value where the CPU contracts into fma as nvcc does).
void blockquant_encode_with_feedback(const float* g, float* e, std::size_t count,
                                     const BlockCodecArgs& args, std::uint8_t* out,
                                     cudaStream_t stream);

// out[j] = alpha * D(in)[j] (add == false) or out[j] += alpha * D(in)[j] (add == true).
// A received run is checked first when `bad` (a device word of scratch) is given: its scales
// as check_block_scales (block_codec.h) holds them, finite and non-negative. A run that fails
// decodes as nothing (zeros with add == false, no change with add == true), so a damaged
// scale cannot put an infinity or a NaN into the bucket, and kSparseBadScale (lbs_cuda.h's
// SparseInvalid, shared by every device decoder's verdicts) goes to *invalid when that is
// still 0 (`invalid`, device memory, may be null). Codes need no check: every b-bit code
// dequantizes to a finite value.
void blockquant_decode_run(const std::uint8_t* in, std::size_t count, int bits, std::size_t block,
                           float alpha, bool add, float* out, cudaStream_t stream,
                           std::uint32_t* bad = nullptr, std::uint32_t* invalid = nullptr);

}  // namespace sparq::cuda
