// TopkSelector::sampled's rule (topk_select.h), one host-device definition for the CPU
// selector and its CUDA twin (compress/cuda/varcount_select_cuda.h), so both draw the same
// sample and walk it the same way, hence select the same entries:
//   the sample: s = max(n / 100, 1024) magnitudes, more when needed for >= 32 of them above
//     the threshold (s k >= 32 n), at most n; draw j is |a[Philox word j of (key, stream) % n]|;
//   the threshold: the rank-th largest sampled magnitude, rank = round(k s / n) at first;
//   a threshold keeping between sampled_min(k) and sampled_max(k) entries is taken, one
//     keeping more is followed by an exact top-k, one keeping fewer moves down the sample
//     (sampled_next_rank), at most kSampledAttempts times, and then the selection is exact.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"
#include "core/rng.h"

namespace sparq::compress {

inline constexpr int kSampledAttempts = 6;

SPARQ_HOST_DEVICE inline std::size_t sampled_size(std::size_t n, std::size_t k) {
  std::size_t s = n / 100 > 1024 ? n / 100 : 1024;
  if (s * k < 32 * n) s = (32 * n + k - 1) / k;
  return s < n ? s : n;
}

// The bucket position of sample draw j.
SPARQ_HOST_DEVICE inline std::size_t sampled_position(std::size_t n, std::uint64_t key,
                                                      std::uint64_t stream, std::size_t j) {
  return philox4x32(key, stream, j / 4)[j % 4] % n;
}

SPARQ_HOST_DEVICE inline std::size_t sampled_first_rank(std::size_t n, std::size_t k,
                                                        std::size_t s) {
  const std::size_t rank = (k * s + n / 2) / n;
  return rank > 1 ? rank : 1;
}

// Too few kept (count < sampled_min(k)): move down the sample in proportion to the shortfall,
// at least 10% further, at most to its end.
SPARQ_HOST_DEVICE inline std::size_t sampled_next_rank(std::size_t rank, std::size_t k,
                                                       std::size_t count, std::size_t s) {
  const std::size_t scaled = rank * k / (count > 1 ? count : 1);
  const std::size_t further = rank + rank / 10 + 1;
  const std::size_t next = scaled > further ? scaled : further;
  return next < s ? next : s;
}

}  // namespace sparq::compress
