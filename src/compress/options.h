// Config keys shared by several compressors, parsed one way everywhere so that `density`,
// `bits`, `block` and `rounding` mean the same thing (and fail the same way) in each.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "compress/block_codec.h"
#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

// density: fraction of entries kept, in (0, 1]; default 0.01.
inline Result<double> parse_density(ConfigReader& r, double fallback = 0.01) {
  return r.real("density", fallback, 0.0, 1.0, /*lo_open=*/true);
}

// The density an encode or decode uses: the step's (ctx.density, when the density warm-up
// sets one) or else the configured one.
inline double density_for(double configured, const EncodeContext& ctx) {
  return ctx.density > 0 ? ctx.density : configured;
}

// k for n entries at density rho: round(rho * n), at least 1 and at most n.
inline std::size_t k_for(double rho, std::size_t n) {
  const auto k = static_cast<std::size_t>(std::llround(rho * static_cast<double>(n)));
  return std::clamp<std::size_t>(k, 1, n);
}

// bits (2, 3, 4, 8; default 4), block (multiple of 8 in [8, 65536]; default 256) and
// rounding (nearest | stochastic; default nearest).
inline Result<BlockQuantParams> parse_block_quant(ConfigReader& r) {
  BlockQuantParams p;
  SPARQ_ASSIGN_OR_RETURN(std::int64_t bits, r.integer_in("bits", 4, {2, 3, 4, 8}));
  SPARQ_ASSIGN_OR_RETURN(std::int64_t block, r.integer("block", 256, 8, 65536));
  if (block % 8 != 0) {
    return Status::error("{}: must be a multiple of 8, got {}", r.full_key("block"), block);
  }
  SPARQ_ASSIGN_OR_RETURN(std::string rounding,
                         r.choice("rounding", "nearest", {"nearest", "stochastic"}));
  p.bits = static_cast<int>(bits);
  p.block = static_cast<std::size_t>(block);
  p.stochastic = rounding == "stochastic";
  return p;
}

// The deterministic contraction of block quantization with round-to-nearest:
// per block ||err||^2 <= ||x||^2 - absmax^2 (1 - c^2 / (4 L^2)) with c = 1 + 2^-10 (the f16
// round-up of the scale) and absmax^2 >= ||x||^2 / B, hence delta = (1 - c^2/(4L^2)) / B.
// Holds while scales are normal f16 (2^-14 <= absmax / L <= 65504: above, the scale is capped
// and values are clamped); 0 for stochastic rounding.
inline double blockquant_delta(const BlockQuantParams& p) {
  if (p.stochastic) return 0.0;
  const double levels = static_cast<double>((1 << (p.bits - 1)) - 1);
  const double c = 1.0 + 1.0 / 1024.0;
  return (1.0 - c * c / (4.0 * levels * levels)) / static_cast<double>(p.block);
}

}  // namespace sparq::compress
