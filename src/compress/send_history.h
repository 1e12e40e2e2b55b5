// SendHistory: for log.never_sent_window, the compressed step at which each coordinate of a
// bucket was last sent, so that the share of coordinates that no message of the last N steps
// carried can be counted (coordinates starved by a sparsifier keep growing in the residual).
//
// "Sent" means the compressor's decoded message has a non-zero value there: a sparsifier's
// kept entries (unless the kept value itself is 0), a quantizer's non-zero codes. Stamps are
// 1-based compressed-step numbers counted by the owner (GradientExchange); 0 means never.
//
// Ownership: the stamps are NOT owned; they are a range of a uint32 array laid out like the
// ParamStore (4 bytes per parameter, allocated only when the window is on). Only the thread
// running the bucket touches them (the CommEngine thread, like the residual).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sparq::compress {

class SendHistory {
 public:
  explicit SendHistory(std::span<std::uint32_t> last_sent) : last_sent_(last_sent) {}

  // The step being encoded from now on (1-based, increasing).
  void begin_step(std::uint32_t stamp) { stamp_ = stamp; }
  std::uint32_t stamp() const { return stamp_; }

  // Records coordinate offset + i as sent at the current step wherever decoded[i] != 0.
  void mark_nonzero(std::size_t offset, std::span<const float> decoded);
  void mark(std::size_t i) { last_sent_[i] = stamp_; }

  // Coordinates that none of the `window` steps ending with the current one sent: last sent
  // at a stamp <= stamp - window, or never. Meaningful once stamp >= window.
  std::size_t count_unsent(std::uint32_t window) const;

  std::size_t size() const { return last_sent_.size(); }

 private:
  std::span<std::uint32_t> last_sent_;
  std::uint32_t stamp_ = 0;
};

}  // namespace sparq::compress
