#include "compress/block_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/byte_io.h"
#include "compress/quant_math.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace sparq::compress {
namespace {

constexpr std::size_t kParallelValues = std::size_t{1} << 16;
// Values are quantized through a small code buffer of this many entries (a multiple of 8,
// so every chunk of a block starts on a byte boundary for any code width).
constexpr std::size_t kChunk = 256;

// The per-element math is quant_math.h's, shared with the CUDA kernels (Note [Byte-identical
// block codes]).
void quantize_chunk(const float* v, std::size_t len, float inv, float levels, bool stochastic,
                    const RoundingRng& rng, std::size_t j0, std::uint8_t* codes) {
  if (!stochastic) {
#pragma omp simd
    for (std::size_t j = 0; j < len; ++j) codes[j] = quantize_nearest(v[j], inv, levels);
    return;
  }
  float u[kChunk];
  rounding_uniforms(rng, j0, len, u);
#pragma omp simd
  for (std::size_t j = 0; j < len; ++j) codes[j] = quantize_stochastic(v[j], inv, levels, u[j]);
}

}  // namespace

void rounding_uniforms(const RoundingRng& rng, std::size_t j0, std::size_t len, float* u) {
  if (rng.positions) {
    for (std::size_t j = 0; j < len; ++j) {
      u[j] = rounding_uniform(rng.key, rng.stream, rng.first_position + rng.positions[j0 + j]);
    }
    return;
  }
  // Contiguous positions: one Philox block yields the draws of 4 consecutive positions (the
  // same numbers as rounding_uniform(), quant_math.h, one position at a time).
  std::size_t j = 0;
  while (j < len) {
    const std::uint64_t pos = rng.first_position + j0 + j;
    const auto words = philox4x32(rng.key, rng.stream, pos / 4);
    for (std::uint64_t w = pos % 4; w < 4 && j < len; ++w, ++j) u[j] = u32_to_unit_float(words[w]);
  }
}

Status check_block_scales(const std::uint8_t* in, std::size_t count, const BlockQuantParams& p,
                          std::string_view who) {
  const std::size_t nblocks = (count + p.block - 1) / p.block;
  for (std::size_t blk = 0; blk < nblocks; ++blk) {
    const std::uint16_t bits = load_u16(in + 2 * blk);
    if (!block_scale_accepted(bits)) {
      return Status::error("{}: block {} has scale bits {:#06x} (negative, infinite or NaN)", who,
                           blk, bits);
    }
  }
  return Status::ok();
}

void pack_codes(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out) {
  const std::size_t b = static_cast<std::size_t>(bits);
  if (bits == 8) {
    std::memcpy(out, codes, count);
    return;
  }
  if (bits == 4) {
    const std::size_t pairs = count / 2;
#pragma omp simd
    for (std::size_t j = 0; j < pairs; ++j) {
      out[j] = static_cast<std::uint8_t>(codes[2 * j] | (codes[2 * j + 1] << 4));
    }
    if (count % 2) out[pairs] = codes[count - 1];
    return;
  }
  // Groups of 8 codes, the last one possibly partial (quant_math.h's packing, shared with
  // the CUDA codec).
  for (std::size_t j = 0; j < count; j += 8) {
    const int group = static_cast<int>(std::min<std::size_t>(8, count - j));
    const std::uint64_t word = pack_code_group(codes + j, group, bits);
    std::memcpy(out + j / 8 * b, &word, (static_cast<std::size_t>(group) * b + 7) / 8);
  }
}

void unpack_codes(const std::uint8_t* in, std::size_t count, int bits, std::uint8_t* codes) {
  const std::size_t b = static_cast<std::size_t>(bits);
  if (bits == 8) {
    std::memcpy(codes, in, count);
    return;
  }
  if (bits == 4) {
    const std::size_t pairs = count / 2;
#pragma omp simd
    for (std::size_t j = 0; j < pairs; ++j) {
      codes[2 * j] = in[j] & 0x0f;
      codes[2 * j + 1] = in[j] >> 4;
    }
    if (count % 2) codes[count - 1] = in[pairs] & 0x0f;
    return;
  }
  for (std::size_t j = 0; j < count; j += 8) {
    std::uint64_t word = 0;
    const std::size_t group = std::min<std::size_t>(8, count - j);
    std::memcpy(&word, in + j / 8 * b, (group * b + 7) / 8);
    for (std::size_t i = 0; i < group; ++i) codes[j + i] = unpack_code(word, static_cast<int>(i), bits);
  }
}

void blockquant_encode_run(const float* v, std::size_t count, const BlockQuantParams& p,
                           const RoundingRng& rng, std::uint8_t* out) {
  SPARQ_CHECK(p.bits >= 2 && p.bits <= 8 && p.block % 8 == 0 && p.block > 0,
              "block codec: bits {} block {}", p.bits, p.block);
  const std::size_t nblocks = (count + p.block - 1) / p.block;
  const float levels = quant_levels(p.bits);
  std::uint8_t* codes_out = out + 2 * nblocks;
#pragma omp parallel for schedule(static) if (count > kParallelValues)
  for (std::size_t blk = 0; blk < nblocks; ++blk) {
    const std::size_t begin = blk * p.block, len = std::min(p.block, count - begin);
    const float* x = v + begin;
    // A maximum: any order (the vector lanes', a GPU block's) gives the same value.
    float absmax = 0.0f;
#pragma omp simd reduction(max : absmax)
    for (std::size_t j = 0; j < len; ++j) absmax = std::max(absmax, std::fabs(x[j]));
    const std::uint16_t scale_bits = block_scale_bits(absmax, levels);
    store_u16(out + 2 * blk, scale_bits);
    const float inv = inverse_scale(float_of_half_bits(scale_bits));
    std::uint8_t codes[kChunk];
    for (std::size_t c = 0; c < len; c += kChunk) {
      const std::size_t clen = std::min(kChunk, len - c);
      quantize_chunk(x + c, clen, inv, levels, p.stochastic, rng, begin + c, codes);
      pack_codes(codes, clen, p.bits, codes_out + (begin + c) / 8 * p.bits);
    }
  }
}

void blockquant_decode_run(const std::uint8_t* in, std::size_t count, const BlockQuantParams& p,
                           float alpha, DecodeMode mode, float* out) {
  const std::size_t nblocks = (count + p.block - 1) / p.block;
  const float levels = quant_levels(p.bits);
  const std::uint8_t* codes_in = in + 2 * nblocks;
#pragma omp parallel for schedule(static) if (count > kParallelValues)
  for (std::size_t blk = 0; blk < nblocks; ++blk) {
    const std::size_t begin = blk * p.block, len = std::min(p.block, count - begin);
    const float f = alpha * float_of_half_bits(load_u16(in + 2 * blk));
    std::uint8_t codes[kChunk];
    for (std::size_t c = 0; c < len; c += kChunk) {
      const std::size_t clen = std::min(kChunk, len - c);
      unpack_codes(codes_in + (begin + c) / 8 * p.bits, clen, p.bits, codes);
      float* y = out + begin + c;
      if (mode == DecodeMode::kSet) {
#pragma omp simd
        for (std::size_t j = 0; j < clen; ++j) y[j] = dequantize(codes[j], levels, f);
      } else {
#pragma omp simd
        for (std::size_t j = 0; j < clen; ++j) y[j] = dequantize_add(y[j], codes[j], levels, f);
      }
    }
  }
}

}  // namespace sparq::compress
