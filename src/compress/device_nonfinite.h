// DeviceNonfiniteGuard: Note [Non-finite local gradients] (gradient_exchange.h) for a store on
// a CUDA device, without the host waiting inside the step. Before a compressed bucket is
// encoded, check() flags it when its local gradient holds a NaN or an infinity (from the
// exchange's own ||g + e||^2 with error feedback, else by one read pass) and zeroes it then.
// After the step's last bucket, agree() counts this rank's flags, sums the count over the
// ranks with the bucket's communicator (an int32 collective on the device) and, when any rank
// flagged a bucket, fills the last bucket's averaged gradient with NaN, so that every rank's
// stepper sees a non-finite aggregate norm and skips the step, as on the CPU. read() reports
// the verdicts after the step (the trainer warns then, naming the rank and the bucket).
//
// Departure from the CPU, stated: there the zeroed bucket goes out WITHOUT error feedback,
// leaving the residual as it was; here the flag lives on the device, so the zeroed bucket is
// encoded like any other and its residual sends what it would send of itself (g = 0). The
// step is skipped, so that share of the residual is lost, as every other rank's sent share
// of that step is lost on the CPU too. Likewise dgc's momentum takes the zeroed gradient
// (u = m u, then masked where sent), where the CPU leaves it as it was. No NaN or infinity
// reaches a residual, a momentum or a message. And with error feedback the flag comes from
// ||g + e||^2, so a finite gradient whose sum with the residual overflows f32 is flagged
// (the step skipped) where the CPU, which reads g alone, takes the step and leaves an
// infinite residual: the device's rule is the safer one (review, 2026-12-06).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "compress/span_stats.h"
#include "core/buffer.h"

namespace sparq::compress {

class DeviceNonfiniteGuard {
 public:
  explicit DeviceNonfiniteGuard(std::size_t buckets);
  ~DeviceNonfiniteGuard();
  DeviceNonfiniteGuard(const DeviceNonfiniteGuard&) = delete;
  DeviceNonfiniteGuard& operator=(const DeviceNonfiniteGuard&) = delete;

  // A new step: clears the verdicts (on the exchange's stream).
  void begin_step(std::int64_t step, void* stream);
  // Before bucket `bucket`'s encode: flags and zeroes g[0, n) when it is not finite. `input`:
  // the device's ||g + e||^2 of this bucket when error feedback measured it, else nullptr.
  void check(std::size_t bucket, float* g, std::size_t n, const SpanStats* input, void* stream);
  // After the step's last bucket, when some bucket was checked this step (see above).
  void agree(comm::Communicator& comm, bool collective, std::span<float> last_bucket, void* stream);

  struct Verdict {
    std::int64_t step = -1;
    int rank = 0;
    std::vector<int> buckets;  // this rank's flagged buckets
    int all_ranks = 0;         // flagged buckets over every rank
  };
  // The verdicts of the last agreed step, once (nullopt-like: step -1 when nothing is new).
  Verdict read();

 private:
  struct Events;
  [[maybe_unused]] std::size_t buckets_;
  Buffer device_, host_;  // words[buckets] then the int32 count
  std::unique_ptr<Events> events_;
  [[maybe_unused]] std::int64_t step_ = -1;
  [[maybe_unused]] int rank_ = 0;
  [[maybe_unused]] bool pending_ = false;
};

}  // namespace sparq::compress
