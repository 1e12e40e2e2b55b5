#include "compress/topk_select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "compress/byte_io.h"
#include "compress/sampled_rule.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/threading.h"

namespace sparq::compress {
namespace {

// Below this size a copy + nth_element beats three passes with 64K-bin histograms.
constexpr std::size_t kSmallSelect = std::size_t{1} << 15;
// Each thread should get enough elements to amortise zeroing its histogram.
constexpr std::size_t kPerThread = std::size_t{1} << 16;
constexpr std::size_t kBins = std::size_t{1} << 16;

int threads_for(std::size_t n) {
  const std::size_t want = std::max<std::size_t>(1, n / kPerThread);
  return static_cast<int>(std::min<std::size_t>(want, static_cast<std::size_t>(max_threads())));
}

// Finds the bin holding the `need`-th largest entry (1-based) of a histogram scanned from the
// top; returns the bin and leaves in `need` the rank of the wanted entry inside that bin.
std::uint32_t find_bin(const std::uint32_t* totals, std::size_t bins, std::size_t& need) {
  for (std::size_t b = bins; b-- > 0;) {
    if (totals[b] >= need) return static_cast<std::uint32_t>(b);
    need -= totals[b];
  }
  SPARQ_FATAL("top-k selection: histogram holds fewer entries than requested");
}

}  // namespace

void TopkSelector::exact(std::span<const float> a, std::size_t k,
                         std::vector<std::uint32_t>& out, std::vector<float>* values) {
  exact_impl(a, k, out, values, /*allow_prefilter=*/true);
}

bool TopkSelector::prefilter(std::span<const float> a, std::size_t k,
                             std::vector<std::uint32_t>& out, std::vector<float>* values) {
  const std::size_t n = a.size();
  // A threshold from a sample that should keep ~1.25 k (plus 4 standard deviations of the
  // sample count): one gathering pass then leaves a short candidate list to select from.
  // The sample positions only affect speed, never the result, so their key is fixed.
  const std::size_t s = std::min(n, std::max<std::size_t>(4096, n / 1024));
  const double expected = static_cast<double>(k) * static_cast<double>(s) / static_cast<double>(n);
  const auto rank = static_cast<std::size_t>(expected * 1.25 + 4.0 * std::sqrt(expected) + 8.0);
  if (rank >= s) return false;
  keys_.resize(s);
  for (std::size_t j = 0; j < s; ++j) keys_[j] = abs_key(a[random_u32_at(0x70b5e1ec7, 0, j) % n]);
  std::nth_element(keys_.begin(), keys_.begin() + (rank - 1), keys_.end(), std::greater<>());
  gather(a, keys_[rank - 1], std::numeric_limits<std::size_t>::max(), prefilter_idx_,
         &prefilter_values_);
  if (prefilter_idx_.size() < k) return false;  // the sample overestimated the threshold
  // Candidates are in index order, so ties among them still go to the lowest index.
  exact_impl(prefilter_values_, k, out, values, /*allow_prefilter=*/false);
  for (std::uint32_t& i : out) i = prefilter_idx_[i];
  return true;
}

void TopkSelector::exact_impl(std::span<const float> a, std::size_t k,
                              std::vector<std::uint32_t>& out, std::vector<float>* values,
                              bool allow_prefilter) {
  const std::size_t n = a.size();
  SPARQ_CHECK(n <= UINT32_MAX, "top-k over {} floats exceeds 32-bit indices", n);
  out.clear();
  if (values) values->clear();
  if (k == 0) return;
  if (k >= n) {
    out.resize(n);
    std::iota(out.begin(), out.end(), 0u);
    if (values) values->assign(a.begin(), a.end());
    return;
  }
  if (allow_prefilter && n >= kSmallSelect && 8 * k <= n && prefilter(a, k, out, values)) return;
  std::uint32_t t = 0;
  std::size_t ties = 0;
  if (n < kSmallSelect) {
    keys_.resize(n);
    for (std::size_t i = 0; i < n; ++i) keys_[i] = abs_key(a[i]);
    std::nth_element(keys_.begin(), keys_.begin() + (k - 1), keys_.end(), std::greater<>());
    t = keys_[k - 1];
    // Entries before k-1 are >= t; the ones equal to t there plus t itself are the ties taken.
    ties = 1 + static_cast<std::size_t>(std::count(keys_.begin(), keys_.begin() + (k - 1), t));
  } else {
    const int nt = threads_for(n);
    hist_.assign(static_cast<std::size_t>(nt + 1) * kBins, 0);
    std::uint32_t* totals = hist_.data() + static_cast<std::size_t>(nt) * kBins;
    // Pass 1: the top 15 magnitude bits (the sign bit is cleared, so bins < 2^15).
#pragma omp parallel num_threads(nt)
    {
      const std::size_t tid = static_cast<std::size_t>(thread_index());
      const std::size_t nthr = static_cast<std::size_t>(team_size());
      std::uint32_t* h = hist_.data() + tid * kBins;
      const std::size_t begin = n * tid / nthr, end = n * (tid + 1) / nthr;
      for (std::size_t i = begin; i < end; ++i) ++h[abs_key(a[i]) >> 16];
    }
    for (int th = 0; th < nt; ++th) {
      const std::uint32_t* h = hist_.data() + static_cast<std::size_t>(th) * kBins;
      for (std::size_t b = 0; b < kBins / 2; ++b) totals[b] += h[b];
    }
    std::size_t need = k;
    const std::uint32_t high = find_bin(totals, kBins / 2, need);
    // Pass 2: the low 16 bits of the entries inside the boundary bin.
    std::fill(hist_.begin(), hist_.end(), 0u);
#pragma omp parallel num_threads(nt)
    {
      const std::size_t tid = static_cast<std::size_t>(thread_index());
      const std::size_t nthr = static_cast<std::size_t>(team_size());
      std::uint32_t* h = hist_.data() + tid * kBins;
      const std::size_t begin = n * tid / nthr, end = n * (tid + 1) / nthr;
      for (std::size_t i = begin; i < end; ++i) {
        const std::uint32_t key = abs_key(a[i]);
        if ((key >> 16) == high) ++h[key & 0xffffu];
      }
    }
    for (int th = 0; th < nt; ++th) {
      const std::uint32_t* h = hist_.data() + static_cast<std::size_t>(th) * kBins;
      for (std::size_t b = 0; b < kBins; ++b) totals[b] += h[b];
    }
    const std::uint32_t low = find_bin(totals, kBins, need);
    t = (high << 16) | low;
    ties = need;
  }
  gather(a, t, ties, out, values);
  SPARQ_CHECK(out.size() == k, "top-k selected {} entries, wanted {}", out.size(), k);
}

void TopkSelector::gather(std::span<const float> a, std::uint32_t t, std::size_t ties,
                          std::vector<std::uint32_t>& out, std::vector<float>* values) {
  const std::size_t n = a.size();
  const int nt = threads_for(n);
  local_.resize(static_cast<std::size_t>(nt));
  std::vector<std::size_t> quota(nt, 0), start(nt + 1, 0);
  // The work is split into nt chunks, and each thread takes chunks tid, tid + team, ...: the
  // runtime may give a smaller team than nt (a call from inside a parallel region, or
  // OMP_DYNAMIC), and every chunk's list must still be filled, not left from an earlier call.
#pragma omp parallel num_threads(nt)
  for (int th = thread_index(); th < nt; th += team_size()) {
    LocalGather& mine = local_[static_cast<std::size_t>(th)];
    mine.clear();
    const std::size_t begin = n * th / nt, end = n * (th + 1) / nt;
    // The value is taken while its cache line is here: re-reading a[i] for the kept entries
    // afterwards missed the cache on every one (a bucket is larger than L2).
    const auto keep = [&](std::size_t i) {
      const float v = a[i];
      if (abs_key(v) == t) mine.ties.push_back(static_cast<std::uint32_t>(mine.idx.size()));
      mine.idx.push_back(static_cast<std::uint32_t>(i));
      mine.val.push_back(v);
    };
    // A branch per entry ran at a third of memory speed; a 64-entry mask of the comparisons
    // (vectorised) and a walk over its set bits keep the same index order at twice the speed.
    std::size_t i = begin;
    for (; i + 64 <= end; i += 64) {
      std::uint64_t mask = 0;
      for (std::size_t j = 0; j < 64; ++j) {
        mask |= static_cast<std::uint64_t>(abs_key(a[i + j]) >= t) << j;
      }
      for (; mask != 0; mask &= mask - 1) {
        keep(i + static_cast<std::size_t>(std::countr_zero(mask)));
      }
    }
    for (; i < end; ++i) {
      if (abs_key(a[i]) >= t) keep(i);
    }
  }
  // Ties go to the lowest indices: hand the quota out in chunk order.
  std::size_t left = ties;
  for (int th = 0; th < nt; ++th) {
    const LocalGather& mine = local_[th];
    quota[th] = std::min(left, mine.ties.size());
    left -= quota[th];
    start[th + 1] = start[th] + (mine.idx.size() - mine.ties.size()) + quota[th];
  }
  out.resize(start[nt]);
  if (values) values->resize(start[nt]);
#pragma omp parallel num_threads(nt)
  for (int th = thread_index(); th < nt; th += team_size()) {  // the chunks, as above
    const LocalGather& mine = local_[static_cast<std::size_t>(th)];
    std::size_t pos = start[th], next_tie = 0;
    // Ties beyond the quota are the later ones (mine.ties is ascending): skip exactly those.
    const std::size_t skip_from = quota[th];
    for (std::size_t j = 0; j < mine.idx.size(); ++j) {
      if (next_tie < mine.ties.size() && mine.ties[next_tie] == j) {
        if (next_tie++ >= skip_from) continue;
      }
      out[pos] = mine.idx[j];
      if (values) (*values)[pos] = mine.val[j];
      ++pos;
    }
  }
}

std::size_t TopkSelector::count_at_least(std::span<const float> a, std::uint32_t t) const {
  const std::size_t n = a.size();
  std::size_t count = 0;
  // `parallel for`, not `parallel for simd`: Note [Reduction lanes], core/ops.cpp.
#pragma omp parallel for reduction(+ : count) schedule(static) if (n > kPerThread)
  for (std::size_t i = 0; i < n; ++i) count += abs_key(a[i]) >= t;
  return count;
}

void TopkSelector::at_least(std::span<const float> a, float threshold,
                            std::vector<std::uint32_t>& out, std::vector<float>* values) {
  SPARQ_CHECK(a.size() <= UINT32_MAX, "selection over {} floats exceeds 32-bit indices",
              a.size());
  gather(a, abs_key(threshold), std::numeric_limits<std::size_t>::max(), out, values);
}

void TopkSelector::sampled(std::span<const float> a, std::size_t k, std::uint64_t key,
                           std::uint64_t stream, std::vector<std::uint32_t>& out,
                           std::vector<float>* values) {
  const std::size_t n = a.size();
  if (k == 0 || k >= n) return exact(a, k, out, values);
  const std::size_t s = sampled_size(n, k);  // the rule: compress/sampled_rule.h
  keys_.resize(s);
  for (std::size_t j = 0; j < s; ++j) keys_[j] = abs_key(a[sampled_position(n, key, stream, j)]);
  std::size_t rank = sampled_first_rank(n, k, s);
  const std::size_t lo = sampled_min(k), hi = sampled_max(k);
  for (int attempt = 0; attempt < kSampledAttempts; ++attempt) {
    std::nth_element(keys_.begin(), keys_.begin() + (rank - 1), keys_.end(), std::greater<>());
    const std::uint32_t t = keys_[rank - 1];
    const std::size_t count = count_at_least(a, t);
    if (count >= lo && count <= hi) {
      gather(a, t, std::numeric_limits<std::size_t>::max(), out, values);
      return;
    }
    if (count > hi) {
      // Too many: keep the candidates and re-select exactly k among them. The result is
      // exact(a, k)'s (every entry of the k largest is a candidate, and the candidates keep
      // index order for the ties), which the CUDA twin relies on (varcount_select_cuda.h).
      gather(a, t, std::numeric_limits<std::size_t>::max(), candidate_idx_, &candidates_);
      exact_impl(candidates_, k, out, values, /*allow_prefilter=*/false);
      for (std::uint32_t& i : out) i = candidate_idx_[i];
      return;
    }
    if (rank == s) break;
    rank = sampled_next_rank(rank, k, count, s);
  }
  exact(a, k, out, values);  // a sample that cannot reach 0.8 k (e.g. mostly zeros): be exact
}

}  // namespace sparq::compress
