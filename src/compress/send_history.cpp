#include "compress/send_history.h"

#include "compress/send_window.h"
#include "core/check.h"

namespace sparq::compress {

void SendHistory::mark_nonzero(std::size_t offset, std::span<const float> decoded) {
  SPARQ_CHECK(offset + decoded.size() <= last_sent_.size(),
              "send history: range [{}, {}) "
              "outside a bucket of {}",
              offset, offset + decoded.size(), last_sent_.size());
  std::uint32_t* last = last_sent_.data() + offset;
  const std::uint32_t stamp = stamp_;
  const std::size_t n = decoded.size();
  // `parallel for`, not `parallel for simd`: Note [Reduction lanes], core/ops.cpp.
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (std::size_t i = 0; i < n; ++i) {
    last[i] = stamp_if_sent(last[i], decoded[i], stamp);
  }
}

std::size_t SendHistory::count_unsent(std::uint32_t window) const {
  const std::uint32_t cutoff = window_cutoff(stamp_, window);
  const std::size_t n = last_sent_.size();
  const std::uint32_t* last = last_sent_.data();
  std::size_t count = 0;
  // `parallel for`, not `parallel for simd`: Note [Reduction lanes], core/ops.cpp.
#pragma omp parallel for schedule(static) reduction(+ : count) if (n > (1u << 16))
  for (std::size_t i = 0; i < n; ++i) count += unsent_in_window(last[i], cutoff) ? 1 : 0;
  return count;
}

}  // namespace sparq::compress
