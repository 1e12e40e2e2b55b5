// The largest index section (sparse_format.h) a message of k kept entries out of n can have:
// the bound of the GPU codecs' fixed-capacity messages (compress/cuda/lbs_cuda.h), which is
// what NCCL's allgather moves, so a tight bound is bytes off every GPU step.
//
// The encoder writes the smaller coding, so the section is at most the bitmap, ceil(n / 8),
// and at most the delta varints. Those are k varints of gaps that sum to idx[k-1] - (k - 1)
// <= n - k; a varint takes one byte plus one more for each power 2^7, 2^14, 2^21, 2^28 its
// value reaches, and at most (n - k) / 2^(7m) of the gaps reach 2^(7m) (each such gap spends
// that much of the sum), so
//     varint bytes <= k + sum over m = 1..4 of min(k, floor((n - k) / 2^(7m))).
// At k = n / 100 that is about 0.018 n, against the bitmap's 0.125 n.
#pragma once

#include <cstddef>

#include "core/host_device.h"

namespace sparq::compress {

SPARQ_HOST_DEVICE inline std::size_t sparse_index_bound(std::size_t n, std::size_t k) {
  const std::size_t bitmap = (n + 7) / 8;
  if (k > n) return bitmap;  // no such message; the bitmap bounds what a reader accepts
  const std::size_t spread = n - k;
  std::size_t varint = k;
  for (int m = 1; m <= 4; ++m) {
    const std::size_t reach = spread >> (7 * m);
    varint += reach < k ? reach : k;
  }
  return varint < bitmap ? varint : bitmap;
}

}  // namespace sparq::compress
