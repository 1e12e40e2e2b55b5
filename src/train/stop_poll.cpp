// Trainer::agree_on_stop_signal: the ranks' poll for a stop at a step boundary (Note [Stopping
// on a signal], train/stop_signals.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstdint>
#include <string>

#include "train/stop_signals.h"
#include "train/trainer.h"

namespace sparq::train {

Result<int> Trainer::agree_on_stop_signal(comm::ByteCounters* moved) {
  const int local = options_.stop_requested();
  // Anything but 0 or a signal number is refused, the same on one rank and on several: one
  // rank returned it unchecked and stopped, several dropped it and never stopped (review,
  // 2026-12-07). Slot 0 counts the ranks that returned such a value.
  constexpr int kSlots = static_cast<int>(kStopSignalSlots);
  const bool out_of_range = local < 0 || local >= kSlots;
  const std::string expected =
      fmt::format("trainer.stop_requested must return 0 or a signal number 1..{}", kSlots - 1);
  if (comm_.size() == 1) {
    if (out_of_range) return Status::error("{}; it returned {}", expected, local);
    return local;
  }
  // Per signal number, how many ranks hold it: the lowest held wins on every rank.
  std::array<std::int32_t, kStopSignalSlots> held{}, all{};
  held[out_of_range ? 0 : static_cast<std::size_t>(local)] = out_of_range || local > 0 ? 1 : 0;
  SPARQ_RETURN_IF_ERROR(run_control("agree: stop signals", [&](comm::Communicator& c) {
    const comm::ByteCounters before = c.bytes();
    c.allreduce(held.data(), all.data(), held.size(), DType::kI32, comm::ReduceOp::kSum);
    if (moved) *moved = c.bytes_since(before);
    return Status::ok();
  }));
  if (all[0] > 0) {
    if (out_of_range)
      spdlog::error("rank {}: trainer.stop_requested returned {}", comm_.rank(), local);
    return Status::error("{}; it returned another value on {} of {} ranks", expected, all[0],
                         comm_.size());
  }
  for (std::size_t sig = 1; sig < all.size(); ++sig) {
    if (all[sig] > 0) return static_cast<int>(sig);
  }
  return 0;
}

}  // namespace sparq::train
