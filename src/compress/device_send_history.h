// DeviceSendHistory: log.never_sent_window for a store on a CUDA device, the twin of the CPU's
// SendHistory (send_history.h; the rule is send_window.h's). The exchange decodes the rank's
// own message (alpha 1) into decoded_scratch() as the CPU's ErrorFeedback does, then record()
// stamps the coordinates where it is non-zero and counts those unsent in the window, on the
// exchange's stream; the count is copied to pinned memory behind the bucket, so the host never
// waits inside the step. read() waits for the bucket's copy, which the step's end has drained.
//
// The stamps are one uint32 per parameter in the store's flat layout (4 bytes per parameter,
// allocated only when the window is on), plus a scratch of the largest bucket's floats. Like
// the CPU's, they are not checkpointed: the window starts with the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/buffer.h"

namespace sparq::compress {

class DeviceSendHistory {
 public:
  DeviceSendHistory(std::size_t flat_numel, std::size_t buckets, std::size_t max_bucket_floats);
  ~DeviceSendHistory();
  DeviceSendHistory(const DeviceSendHistory&) = delete;
  DeviceSendHistory& operator=(const DeviceSendHistory&) = delete;

  // Where the exchange decodes the rank's own message (max_bucket_floats floats).
  float* decoded_scratch() const { return scratch_.as<float>(); }
  // Stamps bucket `bucket`'s coordinates [offset, offset + n) where decoded_scratch() is
  // non-zero with `stamp`, then counts its unsent ones in a window of `window` steps.
  void record(std::size_t bucket, std::size_t offset, std::size_t n, std::uint32_t stamp,
              std::uint32_t window, void* stream);
  // The bucket's last count.
  std::size_t read(std::size_t bucket) const;

 private:
  struct Events;  // one CUDA event per bucket (CUDA types stay out of this header)
  Buffer last_sent_, scratch_, device_counts_, host_counts_;
  std::unique_ptr<Events> events_;
};

}  // namespace sparq::compress
