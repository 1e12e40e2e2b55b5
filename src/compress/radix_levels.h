// Note [Radix selection by levels on the device]
// The device's exact top-k (cuda/topk.cu) finds the k-th largest magnitude key (abs_key, 31
// bits) digit by digit, most significant first, over three levels of 11, 10 and 10 bits:
// level L counts, over the entries whose higher digits equal the prefix the earlier levels
// chose, how many fall in each of its 2^bits bins, and the bin holding the need-th largest
// entry extends the prefix. After the last level the prefix is the threshold key, and `need`
// is how many entries at exactly that key to take (ties, in index order).
//
// Why three small levels and not the CPU's two of 15 and 16 bits (topk_select.cpp): a level's
// histogram must fit in a CUDA block's shared memory (2048 counters, 8 KiB) so that each block
// counts privately and adds its nonzero bins once; a 32768-bin histogram counted with global
// atomics serialises on the few bins that hold most gradients (an embedding's exact zeros hold
// most of its bucket). The threshold and the ties, hence the selection, are the same whatever
// the digits: a CPU test (topk_select_test.cpp) runs these levels against TopkSelector.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace sparq::compress {

inline constexpr int kRadixLevelCount = 3;
inline constexpr std::uint32_t kRadixMaxBins = 2048;  // level 0's

// The lowest bit of level L's digit and its width: 20/11, 10/10, 0/10.
SPARQ_HOST_DEVICE constexpr int radix_shift(int level) {
  return level == 0 ? 20 : level == 1 ? 10 : 0;
}
SPARQ_HOST_DEVICE constexpr int radix_bits(int level) { return level == 0 ? 11 : 10; }
SPARQ_HOST_DEVICE constexpr std::uint32_t radix_bins(int level) {
  return std::uint32_t{1} << radix_bits(level);
}

// Level L's digit of a key.
SPARQ_HOST_DEVICE constexpr std::uint32_t radix_digit(std::uint32_t key, int level) {
  return (key >> radix_shift(level)) & (radix_bins(level) - 1);
}

// The digits above level L of a key: what the earlier levels' prefix is compared with (0 at
// level 0, which counts every entry).
SPARQ_HOST_DEVICE constexpr std::uint32_t radix_prefix(std::uint32_t key, int level) {
  return level == 0 ? 0u : key >> (radix_shift(level) + radix_bits(level));
}

// The prefix after level L chose `bin`: at the last level, the threshold key itself.
SPARQ_HOST_DEVICE constexpr std::uint32_t radix_extend(std::uint32_t prefix, int level,
                                                       std::uint32_t bin) {
  return (prefix << radix_bits(level)) | bin;
}

static_assert(radix_shift(0) + radix_bits(0) == 31, "the levels cover abs_key's 31 bits");
static_assert(radix_shift(1) + radix_bits(1) == radix_shift(0), "level 1 sits below level 0");
static_assert(radix_shift(2) + radix_bits(2) == radix_shift(1), "level 2 sits below level 1");
static_assert(radix_shift(2) == 0, "the last level ends at bit 0");
static_assert(radix_bins(0) == kRadixMaxBins, "level 0 has the most bins");

}  // namespace sparq::compress
