// Block quantization of a run of floats to b-bit signed codes with one f16 scale per block,
// shared by `blockquant` (the run is the whole span) and `lbs` (the run is the kept values).
// The per-element math is quant_math.h's, shared with the CUDA codec (Note [Byte-identical
// block codes]).
//
// Levels: L = 2^(b-1) - 1 (b=2: 1, b=3: 3, b=4: 7, b=8: 127); a value x of a block with scale
// s is sent as q in [-L, L] and decodes to q * s. The scale is absmax(block) / L rounded UP to
// the next f16 (capped at the largest finite f16), so |x| / s <= L never needs clamping and
// deterministic rounding errs by at most s / 2 per value; stochastic rounding
// (q = floor(x / s + u), u ~ U[0, 1) from Philox at the value's position) is unbiased.
//
// Layout of a run of `count` values with block B (a multiple of 8):
//   scales: ceil(count / B) f16 values (2 bytes each)
//   codes:  ceil(count * b / 8) bytes; code c = q + L (0..2L) packed little-endian, 8 codes
//           per b bytes (code j of a group in bits [j*b, j*b + b) of that b-byte word);
//           block i starts at byte i * B * b / 8, a partial last group is zero-padded.
#pragma once

#include <cstddef>
#include <cstdint>

#include "compress/compressor.h"
#include "compress/quant_math.h"  // half_bits_round_up and the per-element math

namespace sparq::compress {

struct BlockQuantParams {
  int bits = 4;            // 2, 3, 4 or 8 for blockquant/lbs; the codec accepts 2..8
  std::size_t block = 256; // multiple of 8
  bool stochastic = false;
};

inline std::size_t block_scale_bytes(std::size_t count, std::size_t block) {
  return 2 * ((count + block - 1) / block);
}
inline std::size_t packed_code_bytes(std::size_t count, int bits) {
  return (count * static_cast<std::size_t>(bits) + 7) / 8;
}
inline std::size_t blockquant_run_bytes(std::size_t count, const BlockQuantParams& p) {
  return block_scale_bytes(count, p.block) + packed_code_bytes(count, p.bits);
}

// The random numbers of stochastic rounding for value j come from Philox (key, stream) at
// counter first_position + positions[j] (or first_position + j when positions is null), so
// any rank can reproduce them and the thread count does not matter.
struct RoundingRng {
  std::uint64_t key = 0;
  std::uint64_t stream = 0;
  std::uint64_t first_position = 0;
  const std::uint32_t* positions = nullptr;
};

// Quantizes v[0..count) into `out` (blockquant_run_bytes(count, p) bytes: scales then codes).
void blockquant_encode_run(const float* v, std::size_t count, const BlockQuantParams& p,
                           const RoundingRng& rng, std::uint8_t* out);

// out[j] = alpha * q_j * s (kSet) or out[j] += alpha * q_j * s (kAdd) for j < count.
void blockquant_decode_run(const std::uint8_t* in, std::size_t count, const BlockQuantParams& p,
                           float alpha, DecodeMode mode, float* out);

// check_message() of a run's scales (the caller checks the run's size): each must be a
// non-negative finite f16 (<= 0x7bff), the only values the encoder writes, so a run that
// passes decodes to finite values. Codes are not checked: every b-bit pattern decodes to a
// value within (2^b - 1 - L) * s, bounded and finite. Errors start with `who`.
Status check_block_scales(const std::uint8_t* in, std::size_t count, const BlockQuantParams& p,
                          std::string_view who);

// len uniform [0, 1) draws for values j0 .. j0 + len - 1 of a run.
void rounding_uniforms(const RoundingRng& rng, std::size_t j0, std::size_t len, float* u);

// Packs/unpacks 8 codes <-> `bits` bytes (shared with qsgd and terngrad).
void pack_codes(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out);
void unpack_codes(const std::uint8_t* in, std::size_t count, int bits, std::uint8_t* codes);

}  // namespace sparq::compress
