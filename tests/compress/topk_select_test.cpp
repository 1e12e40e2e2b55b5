#include "compress/topk_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "compress/magnitude_key.h"
#include "compress/radix_levels.h"
#include "core/threading.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

// Reference: sort indices by (|a| descending, index ascending), take k, sort ascending.
std::vector<std::uint32_t> brute_topk(const std::vector<float>& a, std::size_t k) {
  std::vector<std::uint32_t> idx(a.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::uint32_t x, std::uint32_t y) { return std::fabs(a[x]) > std::fabs(a[y]); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// The values a selection hands back are the selected entries' own, in the same order, and
// asking for them does not change the selection.
void expect_values_of(const std::vector<float>& a, const std::vector<std::uint32_t>& idx,
                      const std::vector<std::uint32_t>& idx_with_values,
                      const std::vector<float>& values) {
  ASSERT_EQ(idx_with_values, idx);
  ASSERT_EQ(values.size(), idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(values[j]), std::bit_cast<std::uint32_t>(a[idx[j]]))
        << "entry " << j << " index " << idx[j];
  }
}

TEST(TopkSelect, ExactMatchesSortingOnBothPaths) {
  TopkSelector sel;
  std::vector<std::uint32_t> out;
  // 1000 uses nth_element, 200003 the radix histogram path.
  for (std::size_t n : {1u, 17u, 1000u, 200003u}) {
    const auto a = testing::normal_vector(n, n);
    for (double rho : {0.0001, 0.01, 0.3, 1.0}) {
      const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(rho * n));
      sel.exact(a, k, out);
      ASSERT_EQ(out.size(), k);
      EXPECT_EQ(out, brute_topk(a, k)) << "n " << n << " k " << k;
      std::vector<std::uint32_t> out2;
      std::vector<float> values;
      sel.exact(a, k, out2, &values);
      expect_values_of(a, out, out2, values);
    }
  }
}

// The device's selection by levels (Note [Radix selection by levels on the device],
// radix_levels.h), run on the host with the same digit functions: the threshold key and the
// ties it reaches select exactly TopkSelector::exact's entries. (cuda/topk.cu counts the same
// histograms in parallel; the gpu test compares its output with the CPU's too.)
std::vector<std::uint32_t> select_by_levels(const std::vector<float>& a, std::size_t k) {
  std::uint32_t prefix = 0;
  std::size_t need = k;
  for (int level = 0; level < kRadixLevelCount; ++level) {
    std::vector<std::size_t> hist(radix_bins(level), 0);
    for (float x : a) {
      const std::uint32_t key = abs_key(x);
      if (radix_prefix(key, level) == prefix) ++hist[radix_digit(key, level)];
    }
    std::uint32_t bin = radix_bins(level);
    bool found = false;
    while (bin > 0 && !found) {
      --bin;
      if (hist[bin] >= need) {
        found = true;
      } else {
        need -= hist[bin];
      }
    }
    if (!found) {
      ADD_FAILURE() << "level " << level << " holds fewer than " << need << " entries";
      return {};
    }
    prefix = radix_extend(prefix, level, bin);
  }
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::uint32_t key = abs_key(a[i]);
    if (key > prefix || (key == prefix && need > 0)) {
      if (key == prefix) --need;
      out.push_back(static_cast<std::uint32_t>(i));
    }
  }
  return out;
}

TEST(TopkSelect, DeviceRadixLevelsSelectTheCpuEntries) {
  TopkSelector sel;
  std::vector<std::uint32_t> want;
  const std::size_t n = 30011;
  std::vector<std::pair<std::string, std::vector<float>>> inputs;
  inputs.emplace_back("normal", testing::normal_vector(n, 7));
  std::vector<float> sparse = testing::normal_vector(n, 8);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 5 != 0) sparse[i] = (i % 2 ? -0.0f : 0.0f);  // an embedding's untouched rows
  }
  inputs.emplace_back("mostly zeros", sparse);
  std::vector<float> tied(n);
  for (std::size_t i = 0; i < n; ++i) tied[i] = static_cast<float>(i % 7) - 3.0f;
  inputs.emplace_back("seven values", tied);
  std::vector<float> close(n);  // magnitudes that differ only in the last digit's bits
  for (std::size_t i = 0; i < n; ++i) {
    close[i] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(1.5f) +
                                    static_cast<std::uint32_t>((i * 37u) % 3000u)) *
               (i % 3 ? 1.0f : -1.0f);
  }
  inputs.emplace_back("one exponent, close mantissas", close);
  std::vector<float> wide = testing::normal_vector(n, 9);
  for (std::size_t i = 0; i < n; i += 3)
    wide[i] = std::ldexp(wide[i], static_cast<int>(i % 250) - 140);
  inputs.emplace_back("subnormal to huge", wide);
  for (const auto& [name, a] : inputs) {
    for (std::size_t k : {std::size_t{1}, std::size_t{2}, n / 100, n / 5, n / 2, n - 1, n}) {
      SCOPED_TRACE(name + ", k " + std::to_string(k));
      sel.exact(a, k, want);
      EXPECT_EQ(select_by_levels(a, k), want);
    }
  }
}

TEST(TopkSelect, TiesAtTheBoundaryGiveExactlyKLowestIndicesFirst) {
  TopkSelector sel;
  std::vector<std::uint32_t> out;
  for (std::size_t n : {100u, 100000u, 300001u}) {
    std::vector<float> a(n, 0.0f);
    for (std::size_t i = 0; i < n; i += 3) a[i] = (i % 2 ? -0.5f : 0.5f);  // many equal magnitudes
    a[n / 2] = 2.0f;
    const std::size_t k = n / 10;
    sel.exact(a, k, out);
    ASSERT_EQ(out.size(), k);
    EXPECT_EQ(out, brute_topk(a, k));
    std::vector<std::uint32_t> out2;
    std::vector<float> values;
    sel.exact(a, k, out2, &values);
    expect_values_of(a, out, out2, values);
    // All zeros still gives exactly k.
    std::vector<float> zeros(n, 0.0f);
    sel.exact(zeros, k, out);
    ASSERT_EQ(out.size(), k);
    EXPECT_EQ(out.back(), k - 1);
  }
}

// The gathers split the array into one chunk per thread and hand the boundary's ties out in
// chunk order. ctest runs one OpenMP thread, so the thread count is set here (the test above
// never split a tie list: review, 2026-12-05). k = n/4 falls inside n/3 tied entries spread
// over the whole array, so the quota runs through several chunks and stops inside one.
TEST(TopkSelect, TiesSplitAcrossThreadsGoToTheLowestIndices) {
  const int saved = max_threads();
  const std::size_t n = (std::size_t{1} << 20) + 5;
  std::vector<float> a(n, 0.0f);
  for (std::size_t i = 0; i < n; i += 3) a[i] = (i % 2 ? -0.5f : 0.5f);
  a[n - 2] = 2.0f;
  const std::size_t k = n / 4;
  const auto want = brute_topk(a, k);
  TopkSelector sel;
  for (const int threads : {2, 3, 4}) {
    set_num_threads(threads);
    std::vector<std::uint32_t> out, out2;
    std::vector<float> values;
    sel.exact(a, k, out);
    EXPECT_EQ(out, want) << threads << " threads";
    sel.exact(a, k, out2, &values);
    expect_values_of(a, out, out2, values);
  }
  set_num_threads(saved);
}

TEST(TopkSelect, SampledCountStaysWithinBounds) {
  // The bounds as docs/compress.md states them, ceil(0.8k) and floor(1.3k), pinned: the
  // checks below read them from the selector (review, 2026-12-07).
  for (const auto& [k, lo, hi] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1},
                                  {7, 6, 9},
                                  {10, 8, 13},
                                  {300, 240, 390},
                                  {3001, 2401, 3901}}) {
    EXPECT_EQ(TopkSelector::sampled_min(k), lo) << k;
    EXPECT_EQ(TopkSelector::sampled_max(k), hi) << k;
  }
  TopkSelector sel;
  std::vector<std::uint32_t> out;
  for (std::size_t n : {5000u, 300000u}) {
    for (std::uint64_t seed = 0; seed < 5; ++seed) {
      auto a = testing::normal_vector(n, 100 + seed);
      if (seed == 3) {
        for (std::size_t i = 0; i < n; i += 2) a[i] = 0.0f;  // half zeros
      }
      for (double rho : {0.001, 0.01, 0.1}) {
        const std::size_t k = static_cast<std::size_t>(rho * n);
        sel.sampled(a, k, seed, 9, out);
        std::vector<std::uint32_t> out2;
        std::vector<float> values;
        sel.sampled(a, k, seed, 9, out2, &values);
        expect_values_of(a, out, out2, values);
        EXPECT_GE(out.size(), TopkSelector::sampled_min(k)) << n << " " << rho;
        EXPECT_LE(out.size(), TopkSelector::sampled_max(k)) << n << " " << rho;
        EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
        EXPECT_TRUE(std::adjacent_find(out.begin(), out.end()) == out.end());
        // What it keeps are the largest: nothing dropped is larger than anything kept.
        float min_kept = INFINITY, max_dropped = 0.0f;
        std::vector<bool> kept(n, false);
        for (auto i : out) kept[i] = true;
        for (std::size_t i = 0; i < n; ++i) {
          if (kept[i]) min_kept = std::min(min_kept, std::fabs(a[i]));
          else max_dropped = std::max(max_dropped, std::fabs(a[i]));
        }
        EXPECT_GE(min_kept, max_dropped);
      }
    }
  }
}

// The sampled rule's two exact endings (compress/sampled_rule.h) are exact(a, k) itself,
// which the CUDA twin relies on (varcount_select_cuda.h): too many kept, with two magnitudes
// only (any sampled threshold keeps a seventh of the bucket or all of it) and with mostly
// zeros (the sampled threshold is 0, which keeps everything).
TEST(TopkSelect, SampledEndsInExactTopkWhereTheSampleCannotDecide) {
  const std::size_t n = 20011, k = 200;
  auto two = testing::normal_vector(n, 3), zeros = two;
  for (std::size_t i = 0; i < n; ++i) {
    two[i] = (two[i] < 0 ? -1.0f : 1.0f) * (i % 7 == 0 ? 1.0f : 0.5f);
    if (i % 400 != 0) zeros[i] = 0.0f;
  }
  for (const auto* a : {&two, &zeros}) {
    TopkSelector sel;
    std::vector<std::uint32_t> sampled, exact;
    std::vector<float> sampled_values, exact_values;
    sel.sampled(*a, k, 77, 9, sampled, &sampled_values);
    sel.exact(*a, k, exact, &exact_values);
    EXPECT_EQ(sampled, exact);
    EXPECT_EQ(sampled_values, exact_values);
  }
}

TEST(TopkSelect, AtLeastKeepsExactlyTheEntriesAboveTheThreshold) {
  TopkSelector sel;
  std::vector<std::uint32_t> out;
  const auto a = testing::normal_vector(150000, 4);
  sel.at_least(a, 2.0f, out);
  std::vector<std::uint32_t> expected;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i]) >= 2.0f) expected.push_back(static_cast<std::uint32_t>(i));
  }
  EXPECT_EQ(out, expected);
  std::vector<std::uint32_t> out2;
  std::vector<float> values;
  sel.at_least(a, 2.0f, out2, &values);
  expect_values_of(a, out, out2, values);
}

// Called from inside a parallel region, the selection gets a team of one while it plans for
// max_threads() chunks. Every chunk's list must be filled by this call: before, the chunks
// no thread ran kept an earlier call's entries, which were merged in (extra, unordered
// indices from at_least; an abort from exact).
TEST(TopkSelect, ASmallerTeamThanPlannedLeavesNoStaleEntries) {
  const int saved = max_threads();
  set_num_threads(4);
  const std::size_t n = std::size_t{1} << 18;  // four chunks of 2^16
  std::vector<float> a(n, 0.0f);
  for (std::size_t i = 0; i < n; i += 97) a[i] = 1.0f + static_cast<float>(i % 13);
  TopkSelector sel;
  std::vector<std::uint32_t> out;
  sel.at_least(a, 0.5f, out);  // a full team fills all four chunks' lists
  for (std::size_t i = 0; i < n; i += 89) a[i] = 0.0f;
  std::vector<std::uint32_t> expected, exact, exact_expected;
  TopkSelector fresh;
  fresh.at_least(a, 0.5f, expected);
  fresh.exact(a, 1000, exact_expected);
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    {
      sel.at_least(a, 0.5f, out);
      sel.exact(a, 1000, exact);
    }
  }
  set_num_threads(saved);
  EXPECT_EQ(out, expected);
  EXPECT_EQ(exact, exact_expected);
}

}  // namespace
}  // namespace sparq::compress
