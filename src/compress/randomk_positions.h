// randomk's stratified positions (randomk.h) as one host-device definition, so the CPU codec
// and its CUDA twin (compress/cuda/randomk.cu) pick the same k positions for a span of n:
// stratum j = [j n / k, (j + 1) n / k), and the position drawn uniformly in it by Philox
// word j of (key, stream), the rank-shared stream every rank agrees on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"
#include "core/rng.h"

namespace sparq::compress {

SPARQ_HOST_DEVICE inline std::size_t randomk_position(std::size_t n, std::size_t k, std::size_t j,
                                                      std::uint64_t key, std::uint64_t stream) {
  const std::size_t lo = j * n / k, hi = (j + 1) * n / k;
  return lo + philox4x32(key, stream, j / 4)[j % 4] % (hi - lo);
}

}  // namespace sparq::compress
