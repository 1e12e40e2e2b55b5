// Float math for CPU loops that the compiler vectorizes: std::exp, std::tanh and std::erf
// are library calls that GCC does not vectorize without -ffast-math (which sparq does not
// use: f16/bf16 rounding and NaN checks need IEEE). Over 50257-column softmax rows std::exp
// was a third of GPT-2 tiny's step; GELU's were a few percent of every transformer step.
// CPU only: the CUDA kernels keep gelu_math.h's expressions on the device's expf/erff.
//
// exp_nonpositive(x) for x <= 0 (a logit minus its row's maximum): Cody-Waite reduction
// x = n ln2 + r, |r| <= ln2 / 2, a degree-7 Taylor polynomial in r (truncation below 6e-9
// relative), and 2^n put into the exponent bits. Relative error within 2 ulp of expf on
// [-87, 0] (tests/layers/vector_math_test.cpp); below -87 the result is 0 (expf's would be a
// denormal under 1.7e-38, which no softmax sum can notice). Branch-free so that loops over
// a row vectorize. NaN in gives NaN out.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace sparq::cpu {

inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 split so that n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const bool underflow = x < -87.0f;
  const float xc = underflow ? -87.0f : x;
  const float shifted = xc * kLog2e + kRound;  // n sits in the low mantissa bits
  const float n = shifted - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // n lies in [-126, 0], so n + 127 is a valid biased exponent of a normal float. It is read
  // from the bits (no float-to-int conversion, which NaN would make undefined).
  const std::int32_t n_int = std::bit_cast<std::int32_t>(shifted) - std::bit_cast<std::int32_t>(kRound);
  const std::int32_t bits = static_cast<std::int32_t>(static_cast<std::uint32_t>(n_int + 127) << 23);
  const float scaled = p * std::bit_cast<float>(bits);
  return underflow ? 0.0f : scaled;
}

// tanh(u) = sign(u) (1 - e) / (1 + e) with e = exp(-2|u|) <= 1: no overflow for any u.
// Absolute error within 3e-7 (relative error grows near 0, where the result is tiny: GELU's
// 0.5 x (1 + tanh) only sees the absolute error).
inline float tanh_approx(float u) {
  const float e = exp_nonpositive(-2.0f * std::fabs(u));
  return std::copysign((1.0f - e) / (1.0f + e), u);
}

// erf by Abramowitz & Stegun 7.1.26: 1 - t (a1 + t (a2 + ...)) exp(-x^2), t = 1 / (1 + p|x|),
// odd in x. Absolute error within 6e-7: A&S's 1.5e-7 plus float rounding of 1 - p t e.
inline float erf_approx(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  return std::copysign(1.0f - p * t * exp_nonpositive(-ax * ax), x);
}

}  // namespace sparq::cpu
