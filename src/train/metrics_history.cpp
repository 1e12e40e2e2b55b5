// set_aside_records_past (metrics.h): a resumed run's metrics file goes on from the step it
// resumes, with what lay past that step kept beside it.
#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <string_view>

#include "core/file_io.h"
#include "core/output_file.h"
#include "train/metrics.h"

namespace sparq::train {
namespace {

// The "step" of one JSON record as the trainer writes it; nullopt for a line without one.
std::optional<std::int64_t> record_step(std::string_view line) {
  constexpr std::string_view kKey = "\"step\":";
  const std::size_t at = line.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  std::int64_t step = 0;
  const char* begin = line.data() + at + kKey.size();
  const auto [end, error] = std::from_chars(begin, line.data() + line.size(), step);
  if (error != std::errc() || end == begin) return std::nullopt;
  return step;
}

}  // namespace

std::vector<std::string> set_aside_records_past(const std::string& metrics, std::int64_t step) {
  // Standard output or a descriptor is the user's stream (never rewritten); a link to a file
  // rewrites the file it names, as set_aside_metrics moves it (checkpoint.h).
  if (metrics.empty() || is_special_file(metrics)) return {};
  const std::string file = resolve_links(metrics);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return {};
  auto read = read_file(file);
  if (!read.is_ok()) return {};  // the writer's open() reports what is wrong with the file
  const std::string& text = *read;
  // Complete lines only: an incomplete last one is the record a killed run was writing, which
  // the writer's open() drops anyway.
  std::string kept, removed;
  std::int64_t past = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t newline = text.find('\n', pos);
    if (newline == std::string::npos) break;
    const std::string_view line(text.data() + pos, newline + 1 - pos);
    const std::optional<std::int64_t> at = record_step(line);
    if (at && *at > step) {
      ++past;
      removed += line;
    } else {
      kept += line;
    }
    pos = newline + 1;
  }
  if (past == 0) return {};
  // The records removed, alone, under a name of their own: a copy of the whole file per
  // resume grew with every requeue of a preempted job, and took the ".superseded" names a
  // fresh start's set-aside pairs with its checkpoints (self-review, 2026-12-07).
  std::string to = fmt::format("{}.past-{}", file, step);
  for (int n = 2; std::filesystem::exists(to, ec); ++n)
    to = fmt::format("{}.past-{}.{}", file, step, n);
  if (const Status s = write_file_atomic(to, removed); !s.is_ok()) {
    return {
        fmt::format("cannot keep the {} records of '{}' past step {} in '{}': {}; they stay "
                    "in it, and readers take the last record of each step",
                    past, file, step, to, s.message())};
  }
  if (const Status s = write_file_atomic(file, kept); !s.is_ok()) {
    return {
        fmt::format("cannot rewrite '{}' up to step {}: {}; its {} records past that step "
                    "stay in it (also in '{}')",
                    file, step, s.message(), past, to)};
  }
  return {
      fmt::format("'{}' held {} records past step {}, where this run resumes (steps it "
                  "redoes, or a history it branches away from): moved to '{}'",
                  file, past, step, to)};
}

}  // namespace sparq::train
