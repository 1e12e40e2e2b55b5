// What lbs.cu (encoding) and lbs_decode.cu (decoding, validation) share: the sparse header's
// size, a block-coded run's size and the decode of one kept value. nvcc only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "compress/cuda/lbs_cuda.h"
#include "compress/quant_math.h"
#include "core/half_math.h"

namespace sparq::cuda::lbs_detail {

constexpr std::size_t kHeaderBytes = 12;  // sparse_format.h

inline std::size_t run_bytes(std::size_t count, const LbsArgs& a) {
  return 2 * ((count + a.block - 1) / a.block) + (count * static_cast<std::size_t>(a.bits) + 7) / 8;
}

// alpha * D(m) of kept entry j, as the CPU's blockquant_decode_run (kSet) forms it: one
// product, which __fmul_rn keeps nvcc from fusing into the caller's sum.
__device__ inline float kept_value(const std::uint8_t* run, std::size_t k, std::size_t j,
                                   int bits, std::size_t block, float alpha) {
  const std::size_t nblocks = (k + block - 1) / block;
  const std::size_t blk = j / block;
  const auto scale_bits = static_cast<std::uint16_t>(
      run[2 * blk] | (static_cast<std::uint16_t>(run[2 * blk + 1]) << 8));
  const float f = alpha * float_of_half_bits(scale_bits);
  // Code j: lane j % 8 of the group of 8 (the last one partial) at byte j / 8 * bits.
  const std::size_t first = j / 8 * 8;
  const int in_group = static_cast<int>(k - first < 8 ? k - first : 8);
  const std::uint8_t* group = run + 2 * nblocks + j / 8 * static_cast<std::size_t>(bits);
  std::uint64_t word = 0;
  for (int b = 0; b < (in_group * bits + 7) / 8; ++b) {
    word |= static_cast<std::uint64_t>(group[b]) << (8 * b);
  }
  const std::uint8_t code = compress::unpack_code(word, static_cast<int>(j % 8), bits);
  return __fmul_rn(static_cast<float>(code) - compress::quant_levels(bits), f);
}

}  // namespace sparq::cuda::lbs_detail
