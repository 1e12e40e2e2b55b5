// Selection of large-magnitude entries, shared by the sparsifying compressors.
//
// TopkSelector::exact picks EXACTLY k indices: those of the k largest |a[i]|, ties at the
// boundary magnitude broken towards the lowest index, returned in ascending order. For
// k <= n / 8 it first gathers the candidates above a threshold estimated from a small sample
// (one pass over a) and selects among those; if the sample guessed too high it falls back to
// the full radix selection on the magnitude bits (abs_key): one histogram pass over the top
// 15 bits, one over the low 16 bits of the boundary bin, one gathering pass. Either way O(n),
// no sort, per-thread parts merged in a fixed order, and the result is the same set, whatever
// the path or the thread count.
//
// TopkSelector::sampled estimates the threshold from a seeded random sample (DGC style) and
// returns between ceil(0.8 k) and floor(1.3 k) indices in ascending order: a threshold that
// keeps too few is lowered (re-estimated from the sample), a threshold that keeps too many is
// followed by an exact re-selection of k among the candidates.
//
// Ownership: the selector owns its scratch memory, reused across calls; one per compressor.
// Precondition: a.size() < 2^32 and all entries finite (NaN magnitudes sort above +inf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparq::compress {

class TopkSelector {
 public:
  // With `values`, (*values)[j] = a[out[j]] on return, taken during the selection's own pass
  // over a (reading them back afterwards costs a cache miss per entry on a large bucket).
  void exact(std::span<const float> a, std::size_t k, std::vector<std::uint32_t>& out,
             std::vector<float>* values = nullptr);
  void sampled(std::span<const float> a, std::size_t k, std::uint64_t key, std::uint64_t stream,
               std::vector<std::uint32_t>& out, std::vector<float>* values = nullptr);

  // Indices with |a[i]| >= threshold, ascending (threshold > 0; the threshold compressor).
  void at_least(std::span<const float> a, float threshold, std::vector<std::uint32_t>& out,
                std::vector<float>* values = nullptr);

  // The bounds `sampled` guarantees.
  static std::size_t sampled_min(std::size_t k) { return (8 * k + 9) / 10; }
  static std::size_t sampled_max(std::size_t k) { return (13 * k) / 10; }

 private:
  // Gathers indices i with key(i) > t, plus the first `ties` indices with key(i) == t.
  void gather(std::span<const float> a, std::uint32_t t, std::size_t ties,
              std::vector<std::uint32_t>& out, std::vector<float>* values);
  std::size_t count_at_least(std::span<const float> a, std::uint32_t t) const;
  void exact_impl(std::span<const float> a, std::size_t k, std::vector<std::uint32_t>& out,
                  std::vector<float>* values, bool allow_prefilter);
  // The sample-threshold shortcut of exact(); false when it cannot be sure of k entries.
  bool prefilter(std::span<const float> a, std::size_t k, std::vector<std::uint32_t>& out,
                 std::vector<float>* values);

  // One thread's share of a gather: indices and values above the threshold in index order,
  // and the positions (in idx) of those exactly at it.
  struct LocalGather {
    std::vector<std::uint32_t> idx;
    std::vector<float> val;
    std::vector<std::uint32_t> ties;
    void clear() {
      idx.clear();
      val.clear();
      ties.clear();
    }
  };

  std::vector<std::uint32_t> hist_;
  std::vector<LocalGather> local_;
  std::vector<std::uint32_t> keys_;
  std::vector<float> candidates_;
  std::vector<std::uint32_t> candidate_idx_;
  std::vector<float> prefilter_values_;
  std::vector<std::uint32_t> prefilter_idx_;
};

}  // namespace sparq::compress
