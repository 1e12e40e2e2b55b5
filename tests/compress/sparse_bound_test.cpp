// sparse_index_bound (compress/sparse_bound.h), the GPU messages' fixed capacity: every index
// set's section (the smaller coding, as the encoder writes it) fits, for random sets and the
// adversarial ones (gaps at each varint length's threshold, evenly spread, one far index),
// and the bound is far below the bitmap at the densities the method uses.
#include "compress/sparse_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "compress/sparse_format.h"

namespace sparq::compress {
namespace {

// The section the encoder writes for these sorted indices out of n.
std::size_t section_bytes(const std::vector<std::uint32_t>& idx, std::size_t n) {
  return std::min(delta_varint_bytes(idx), bitmap_bytes(n));
}

// k indices whose gaps are `gap` while the budget lasts, then 0.
std::vector<std::uint32_t> with_gaps(std::size_t n, std::size_t k, std::size_t gap) {
  std::vector<std::uint32_t> idx;
  std::size_t next = 0;
  for (std::size_t j = 0; j < k; ++j) {
    const std::size_t room = n - next - (k - j);  // keep room for the rest at gap 0
    next += std::min(gap, room);
    idx.push_back(static_cast<std::uint32_t>(next));
    ++next;
  }
  return idx;
}

TEST(SparseBound, EveryIndexSetFits) {
  std::mt19937_64 rng(11);
  for (std::size_t n : {1, 2, 127, 128, 129, 1000, 16384, 16385, 100000, 3000000}) {
    for (std::size_t k : {std::size_t{1}, n / 1000, n / 100, n / 10, n / 2, n}) {
      if (k == 0 || k > n) continue;
      const std::size_t bound = sparse_index_bound(n, k);
      std::vector<std::vector<std::uint32_t>> sets;
      for (std::size_t gap :
           {std::size_t{0}, std::size_t{127}, std::size_t{128}, std::size_t{16383},
            std::size_t{16384}, std::size_t{2097152}, (n - k) / k, (n - k) / k + 1, n}) {
        sets.push_back(with_gaps(n, k, gap));
      }
      // Random sets.
      for (int trial = 0; trial < (n > 200000 ? 1 : 5); ++trial) {
        std::vector<std::uint32_t> all(n);
        for (std::size_t i = 0; i < n; ++i) all[i] = static_cast<std::uint32_t>(i);
        std::shuffle(all.begin(), all.end(), rng);
        std::vector<std::uint32_t> idx(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
        std::sort(idx.begin(), idx.end());
        sets.push_back(idx);
      }
      for (const auto& idx : sets) {
        ASSERT_EQ(idx.size(), k);
        ASSERT_LT(idx.back(), n);
        ASSERT_LE(section_bytes(idx, n), bound) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(SparseBound, IsFarBelowTheBitmapAtLowDensity) {
  const std::size_t n = 25'000'000;                                  // a 100 MB bucket
  EXPECT_LT(sparse_index_bound(n, n / 100), bitmap_bytes(n) / 6);    // 1%
  EXPECT_LT(sparse_index_bound(n, n / 1000), bitmap_bytes(n) / 14);  // 0.1%
  EXPECT_EQ(sparse_index_bound(n, n), bitmap_bytes(n));              // dense: the bitmap is smaller
}

// A message whose count the device chooses (lbs_cuda.h's SparseSelection) lives in a buffer
// sized for the most entries: fewer entries' index bound exceeds the most's by at most 3
// bytes (each of the four shifted terms loses at most one per 128 fewer entries, while the
// count term loses one per entry), which the capacity's 4 bytes of slack cover.
TEST(SparseBound, FewerEntriesNeedAtMostThreeBytesMore) {
  for (std::size_t n :
       {std::size_t{1000}, std::size_t{70001}, std::size_t{1} << 21, std::size_t{3} << 24}) {
    for (double rho : {0.001, 0.01, 0.3, 1.0}) {
      const std::size_t most = std::max<std::size_t>(1, static_cast<std::size_t>(rho * n));
      const std::size_t worst = sparse_index_bound(n, most) + 3;
      // Every count near the top and a stride through the rest.
      for (std::size_t c = 0; c <= most; c += (most - c > 4096 ? 97 : 1)) {
        ASSERT_LE(sparse_index_bound(n, c), worst) << n << " " << c << " of " << most;
      }
    }
  }
}

}  // namespace
}  // namespace sparq::compress
