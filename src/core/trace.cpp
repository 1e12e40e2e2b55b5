#include "core/trace.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/file_io.h"
#include "core/output_file.h"
#include "core/timer.h"

namespace sparq {
namespace {

// Minimal JSON string escaping for span names.
std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += c;
    }
  }
  return out;
}

const char* lane_name(TraceLane lane) {
  switch (lane) {
    case TraceLane::kCompute: return "compute";
    case TraceLane::kCommunication:
      return "communication";
  }
  return "?";
}

}  // namespace

void TraceRecorder::record(TraceSpan span) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(std::move(span));
}

std::vector<TraceSpan> TraceRecorder::spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

void TraceRecorder::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.clear();
}

std::string TraceRecorder::chrome_events(int rank, std::int64_t origin_us) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  // Name the rows once: the process by rank, the threads by lane.
  out += fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {}"}}}})",
                     rank, rank);
  for (TraceLane lane : {TraceLane::kCompute, TraceLane::kCommunication}) {
    out += fmt::format(
        R"(,{{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", rank,
        static_cast<int>(lane), lane_name(lane));
  }
  for (const TraceSpan& s : spans_) {
    std::string args;
    if (s.step >= 0) args += fmt::format(R"("step":{})", s.step + step_base_);
    if (s.bytes >= 0) args += fmt::format(R"({}"bytes":{})", args.empty() ? "" : ",", s.bytes);
    out += fmt::format(R"(,{{"name":"{}","cat":"{}","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{{{}}}}})",
                       escape(s.name), escape(s.category), s.start_us - origin_us,
                       std::max<std::int64_t>(0, s.end_us - s.start_us), rank,
                       static_cast<int>(s.lane), args);
  }
  return out;
}

Status TraceRecorder::write_chrome_json(const std::string& path, int rank) const {
  std::int64_t origin = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spans_.empty()) {
      origin = std::min_element(spans_.begin(), spans_.end(), [](auto& a, auto& b) {
                 return a.start_us < b.start_us;
               })->start_us;
    }
  }
  // Through write_file_atomic, whose every write, fsync and close is checked, in a private
  // new file: a shared path + ".tmp" was truncated through whatever it linked to, raced a
  // second writer, and lost the error of the flush at close (review, 2026-12-06).
  const std::string json =
      R"({"displayTimeUnit":"ms","traceEvents":[)" + chrome_events(rank, origin) + "]}\n";
  // A link's file is replaced, a device written in place (core/output_file.h).
  return write_output_file(path, json);
}

ScopedTrace::ScopedTrace(TraceRecorder* recorder, std::string_view name,
                         std::string_view category, std::int64_t step, TraceLane lane)
    : recorder_(recorder && recorder->enabled() ? recorder : nullptr) {
  if (!recorder_) return;
  span_.name = name;
  span_.category = category;
  span_.step = step;
  span_.lane = lane;
  span_.start_us = now_us();
}

ScopedTrace::~ScopedTrace() {
  if (!recorder_) return;
  span_.end_us = now_us();
  recorder_->record(std::move(span_));
}

}  // namespace sparq
