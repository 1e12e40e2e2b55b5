// The block codec's per-element math (block_codec.h) as shared host-device functions
// (core/host_device.h): the CPU codec and the CUDA kernels (compress/cuda/block_codec.cu)
// call the same definitions, so a message encoded on a GPU is byte-identical to the CPU's for
// the same input and context, and the CPU tests cover the device's arithmetic.
//
// Note [Byte-identical block codes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Encoding uses only operations that IEEE fixes on both sides: |x|, comparisons (the block's
// absmax is a maximum, so any reduction order gives the same value), one division (1 / s; nvcc
// divides correctly rounded unless told otherwise, and sparq never is), products and sums that
// are not fused (a clamp sits between the product and the sum), and float -> int truncation of
// a non-negative value. The clamps are written as the ternaries std::max/std::min are, so the
// vectorized CPU loops and the kernels agree even on NaN (a NaN clamps to NaN, whose code is
// 0 on both; the exchange zeroes non-finite buckets before encoding anyway). Decoding into
// a sum (kAdd, and error feedback's e = a - D(m)) is dequantize_add below on both sides.
//
// Note [Fused decode-add]
// ~~~~~~~~~~~~~~~~~~~~~~~
// y + (c - L) f is ONE fused multiply-add, spelled out (std::fma), not left to the compilers'
// contraction: g++ contracts `y += (c - L) * f` only with FMA hardware enabled
// (-march=native), and nvcc did not contract the decode kernels at all, whose select between
// the product and the sum (a refused message decodes as nothing) kept them apart: their PTX
// had no fma, so a GPU kAdd decode rounded twice where the CPU rounded once, one ulp apart
// wherever the product is inexact (alpha = 1/3, qsgd's norm / s). With the fma written out
// every device rounds once, and kAdd decodes and residuals agree bit for bit. (A CPU without
// FMA gets a correct but slow software fma.)
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half_math.h"
#include "core/host_device.h"
#include "core/rng.h"

namespace sparq::compress {

// L = 2^(b-1) - 1: codes are q + L for q in [-L, L].
SPARQ_HOST_DEVICE inline float quant_levels(int bits) {
  return static_cast<float>((1 << (bits - 1)) - 1);
}

// The largest finite f16's bits. Positive f16 bit patterns order like their values.
inline constexpr std::uint16_t kLargestHalfBits = 0x7bff;

// The f16 bits of the smallest f16 >= s (s >= 0), capped at the largest finite f16.
SPARQ_HOST_DEVICE inline std::uint16_t half_bits_round_up(float s) {
  std::uint16_t bits = half_bits_of(s);
  if (float_of_half_bits(bits) < s) ++bits;
  return bits < kLargestHalfBits ? bits : kLargestHalfBits;
}

// Whether a received block scale is one the encoder can write: a non-negative finite f16.
// Negative, infinite and NaN scales are refused, on the CPU (check_block_scales) and on the
// device (the lbs and blockquant decoders), so none reaches a bucket.
SPARQ_HOST_DEVICE inline bool block_scale_accepted(std::uint16_t bits) {
  return bits <= kLargestHalfBits;
}

// std::max(m, |x|) as the CPU loop writes it (a NaN |x| never wins).
SPARQ_HOST_DEVICE inline float absmax_step(float m, float x) {
  const float a = x < 0.0f ? -x : x;
  return m < a ? a : m;
}

// Note [Listed zeros]: in the tree's merge by encode (gtopk_aggregator.h), a position some
// rank listed whose sum decodes to 0 (a kept value that quantized to zero, or sums that
// cancel) is given this value, so that the re-selection ranks it above every position no rank
// listed (exact zeros) and below every real value (lbs's smallest nonzero decode is an f16
// subnormal scale over L, above 1e-8). It quantizes to code L, which decodes to 0 again.
inline constexpr float kListedZero = 1.17549435e-38f;  // FLT_MIN

// The scale of a block whose largest |value| is absmax (0 for an all-zero block).
SPARQ_HOST_DEVICE inline std::uint16_t block_scale_bits(float absmax, float levels) {
  return absmax > 0.0f ? half_bits_round_up(absmax / levels) : static_cast<std::uint16_t>(0);
}
SPARQ_HOST_DEVICE inline float inverse_scale(float scale) { return scale > 0.0f ? 1.0f / scale : 0.0f; }

// std::min(std::max(x * inv, -L), L).
SPARQ_HOST_DEVICE inline float clamp_to_levels(float x, float inv, float levels) {
  const float y = x * inv;
  const float lo = y < -levels ? -levels : y;
  return levels < lo ? levels : lo;
}

// Nearest: floor(y + 0.5) + L = trunc(y + (L + 0.5)) since the operand is >= 0.5. NaN goes to
// code 0 by a select: converting NaN to int is undefined behaviour in C++ (x86 gave INT_MIN,
// whose low byte is 0, and CUDA gives 0: review, 2026-12-07).
SPARQ_HOST_DEVICE inline std::uint8_t quantize_nearest(float x, float inv, float levels) {
  const float shifted = clamp_to_levels(x, inv, levels) + (levels + 0.5f);
  return static_cast<std::uint8_t>(static_cast<int>(shifted == shifted ? shifted : 0.0f));
}

// Stochastic: floor(y + u) + L with u ~ U[0, 1), unbiased. y + u is formed first: at y = 0 it
// is u exactly, so a zero is always code L and decodes to zero (Note [Padding stays zero],
// core/param_store.h), where (y + L) + u rounded up to L + 1 when u was within half an ulp of
// 1 (review, 2026-12-05). The sum is capped at L before the floor (the same as capping the
// level, L being an integer; at y = L the sum can round up to L + 1), which also sends NaN to
// L. The floor is a truncation, one less for a negative non-integer: floorf does not
// vectorize under the default -ftrapping-math, and the CPU loop ran 2x slower with it.
SPARQ_HOST_DEVICE inline std::uint8_t quantize_stochastic(float x, float inv, float levels,
                                                          float u) {
  const float sum = clamp_to_levels(x, inv, levels) + u;
  const float capped = sum < levels ? sum : levels;  // in [-L, L]
  int level = static_cast<int>(capped);
  level -= static_cast<float>(level) > capped ? 1 : 0;
  return static_cast<std::uint8_t>(level + static_cast<int>(levels));
}

// The rounding draw of the value at `position` (block_codec.h, RoundingRng).
SPARQ_HOST_DEVICE inline float rounding_uniform(std::uint64_t key, std::uint64_t stream,
                                                std::uint64_t position) {
  return u32_to_unit_float(philox4x32(key, stream, position / 4)[position % 4]);
}

// QSGD's unbiased rounding (qsgd.h) of x in a chunk of norm `norm` to a level in 0..s, s =
// the levels, as the code sign * l + s. ratio = s / norm (0 for a zero norm); when it
// overflows (a subnormal norm: `tiny_norm`) the magnitude divides by the norm instead, since
// 0 * inf would be NaN. The level is floor(y + u) capped at s; capping y at s first changes
// no level (floor(s + u) = s) but keeps the product out of the sum, so no compiler fuses
// them (Note [Byte-identical block codes]), and a NaN y lands on level s instead of an
// undefined conversion.
SPARQ_HOST_DEVICE inline std::uint8_t qsgd_code(float x, float ratio, bool tiny_norm, float norm,
                                                float s, float u) {
  const float magnitude = fabsf(x);
  const float y = tiny_norm ? magnitude / norm * s : magnitude * ratio;
  const float capped = y < s ? y : s;
  const float floored = floorf(capped + u);
  const float level = floored < s ? floored : s;
  return static_cast<std::uint8_t>(static_cast<int>((x < 0.0f ? -level : level) + s));
}

// The norm a QSGD chunk stores: the square root of its double sum of squares, capped at the
// largest f32. A chunk whose norm is beyond f32's range (values near 3.4e38 / sqrt(chunk))
// stored inf, every code fell to level 0, and decode's 0 * inf made the chunk NaN; any stored
// norm >= max |x| keeps the rounding unbiased.
SPARQ_HOST_DEVICE inline float qsgd_chunk_norm(double sum_squares) {
  const double norm = sqrt(sum_squares);
  constexpr double kMax = 3.4028234663852886e38;  // FLT_MAX
  return norm < kMax ? static_cast<float>(norm) : static_cast<float>(kMax);
}

// TernGrad's code (terngrad.h): x clipped to [-s, s], then QSGD's rounding with one level,
// so the code is sign * Bernoulli(|x| / s) + 1 in 0..2. inv = 1 / s (0 for s = 0; `tiny`
// when it overflows).
SPARQ_HOST_DEVICE inline std::uint8_t terngrad_code(float x, float s, float inv, bool tiny,
                                                    float u) {
  const float clipped = x < -s ? -s : (s < x ? s : x);  // std::clamp(x, -s, s)
  return qsgd_code(clipped, inv, tiny, s, 1.0f, u);
}

SPARQ_HOST_DEVICE inline float dequantize(std::uint8_t code, float levels, float f) {
  return (static_cast<float>(code) - levels) * f;
}

// y + dequantize(code, levels, f) rounded once (Note [Fused decode-add]).
SPARQ_HOST_DEVICE inline float dequantize_add(float y, std::uint8_t code, float levels, float f) {
  return std::fma(static_cast<float>(code) - levels, f, y);
}

// Up to 8 codes of `bits` bits, code i in bits [i * bits, i * bits + bits) of the word.
SPARQ_HOST_DEVICE inline std::uint64_t pack_code_group(const std::uint8_t* codes, int count,
                                                       int bits) {
  std::uint64_t word = 0;
  for (int i = 0; i < count; ++i) word |= static_cast<std::uint64_t>(codes[i]) << (i * bits);
  return word;
}
SPARQ_HOST_DEVICE inline std::uint8_t unpack_code(std::uint64_t word, int i, int bits) {
  return static_cast<std::uint8_t>((word >> (i * bits)) & ((std::uint64_t{1} << bits) - 1));
}

}  // namespace sparq::compress
