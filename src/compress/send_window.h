// The never-sent window's rule (log.never_sent_window), one definition for SendHistory on the
// CPU (send_history.h) and its device twin (cuda/send_history_cuda.h): a coordinate's stamp is
// the 1-based compressed step at which its own decoded message was last non-zero there (0:
// never); after the step stamped `stamp`, it is unsent in a window of `window` steps when its
// stamp is at most window_cutoff(stamp, window).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace sparq::compress {

SPARQ_HOST_DEVICE inline std::uint32_t window_cutoff(std::uint32_t stamp, std::uint32_t window) {
  return stamp >= window ? stamp - window : 0;
}

SPARQ_HOST_DEVICE inline bool unsent_in_window(std::uint32_t last_sent, std::uint32_t cutoff) {
  return last_sent <= cutoff;
}

// Stamps a coordinate whose decoded value is non-zero ("sent"; -0.0f counts as zero).
SPARQ_HOST_DEVICE inline std::uint32_t stamp_if_sent(std::uint32_t last_sent, float decoded,
                                                     std::uint32_t stamp) {
  return decoded != 0.0f ? stamp : last_sent;
}

}  // namespace sparq::compress
