// Chrome-trace recording: spans of compute (forward, backward per layer, optimizer) and
// communication (compression and collectives per bucket), written as the Trace Event JSON
// format that Perfetto (ui.perfetto.dev) and chrome://tracing open. One process row per
// rank ("pid" = rank) and one thread row per lane, so compute and communication appear on
// separate rows and their overlap is visible at a glance.
//
// Thread-safe: the compute thread and the communication engine's thread record concurrently.
// Recording is off until enable(); a disabled recorder costs one relaxed atomic load per span.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sparq {

// A bucket's compression is on the communication lane, inside its task (comm_engine.cpp); a
// lane of its own was named in every trace and never written (review, 2026-12-07).
enum class TraceLane : int { kCompute = 0, kCommunication = 1 };

struct TraceSpan {
  std::string name;      // "backward h.3.attn", "allgather bucket 2"
  std::string category;  // "forward", "backward", "comm", "compress", "optimizer", ...
  std::int64_t start_us = 0;
  std::int64_t end_us = 0;
  TraceLane lane = TraceLane::kCompute;
  std::int64_t step = -1;
  std::int64_t bytes = -1;  // shown as an argument when >= 0
};

class TraceRecorder {
 public:
  void enable(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // The number the written trace shows for recorded step 0 (the trainer records its 0-based
  // step index and sets 1, so the trace numbers steps as its log and metrics do).
  void set_step_base(std::int64_t base) { step_base_ = base; }

  void record(TraceSpan span);
  std::vector<TraceSpan> spans() const;
  void clear();

  // Writes {"traceEvents": [...]} for this recorder's spans, with pid = rank. Timestamps are
  // microseconds relative to the earliest span; steady clocks agree only between processes of
  // one host (comm/gather.h merges the ranks of several hosts).
  Status write_chrome_json(const std::string& path, int rank) const;
  // The JSON events only (comma-separated, no brackets), to merge several ranks in one file.
  std::string chrome_events(int rank, std::int64_t origin_us) const;

 private:
  std::atomic<bool> enabled_{false};
  std::int64_t step_base_ = 0;
  mutable std::mutex mutex_;
  std::vector<TraceSpan> spans_;
};

// RAII span on the compute lane: records [construction, destruction) when enabled.
class ScopedTrace {
 public:
  ScopedTrace(TraceRecorder* recorder, std::string_view name, std::string_view category,
              std::int64_t step = -1, TraceLane lane = TraceLane::kCompute);
  ~ScopedTrace();
  ScopedTrace(const ScopedTrace&) = delete;
  ScopedTrace& operator=(const ScopedTrace&) = delete;

 private:
  TraceRecorder* recorder_;
  TraceSpan span_;
};

}  // namespace sparq
