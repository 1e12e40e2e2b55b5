// The layout and bucket-range records of a checkpoint and the resume checks on them (Note
// [Layouts in the checkpoint], checkpointing.cpp).
#include "train/checkpoint_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "train/train_config.h"

namespace sparq::train {
namespace {

// "name offset numel" lines as name -> "offset numel".
std::map<std::string, std::string> layout_entries(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t space = line.find(' ');
    out[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return out;
}

std::string describe_place(const std::string& offset_numel) {
  std::istringstream fields(offset_numel);
  std::string offset, numel;
  fields >> offset >> numel;
  return fmt::format("offset {} ({} floats)", offset, numel);
}

// The settings under `keys` (dotted prefixes) that this run changed from the checkpoint's
// resolved config, for the refusals below: "; changed here: comm.bucket_mb: 1 -> 0.5".
std::string changed_settings(const CheckpointFile& f, const std::string& here,
                             std::initializer_list<std::string_view> keys) {
  if (!f.meta.count("config")) return "";
  std::vector<std::string> changed;
  for (const std::string& d : config_differences(f.meta.at("config"), here)) {
    for (std::string_view key : keys) {
      if (d.starts_with(key)) {
        changed.push_back(d);
        break;
      }
    }
  }
  return changed.empty() ? "" : fmt::format("; changed here: {}", fmt::join(changed, "; "));
}

}  // namespace

std::string layout_text(const ParamStore& store) {
  std::string out;
  for (const ParamEntry& e : store.entries()) {
    out += fmt::format("{} {} {}\n", e.spec.name, e.offset, e.numel);
  }
  return out;
}

BucketRanges bucket_ranges(const comm::BucketPlan& plan) {
  BucketRanges out;
  for (const comm::Bucket& b : plan.buckets()) {
    out.emplace_back(static_cast<std::size_t>(b.range.offset),
                     static_cast<std::size_t>(b.range.count));
  }
  return out;
}

std::string format_bucket_ranges(const BucketRanges& ranges) {
  std::string out;
  for (const auto& [offset, count] : ranges) out += fmt::format("{} {}\n", offset, count);
  return out;
}

Result<BucketRanges> parse_bucket_ranges(const std::string& text, const std::string& file) {
  BucketRanges out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::size_t offset = 0, count = 0;
    std::string rest;
    if (!(fields >> offset >> count) || (fields >> rest)) {
      return Status::error("{}: metadata 'buckets' has a bad line '{}' (expected 'offset count')",
                           file, line);
    }
    out.emplace_back(offset, count);
  }
  return out;
}

Status check_layout(const CheckpointFile& f, const std::string& here, const std::string& config) {
  const auto saved = f.meta.find("layout");
  // A checkpoint from before the layout was recorded: only flat_numel was checked, as then.
  if (saved == f.meta.end() || saved->second == here) return Status::ok();
  const auto there = layout_entries(saved->second), now = layout_entries(here);
  std::size_t moved = 0;
  std::string first;
  for (const auto& [name, place] : there) {
    const auto it = now.find(name);
    if (it != now.end() && it->second == place) continue;
    ++moved;
    if (first.empty()) {
      first = fmt::format("'{}' at {} there, {} here", name, describe_place(place),
                          it == now.end() ? "absent" : "at " + describe_place(it->second));
    }
  }
  for (const auto& [name, place] : now) {
    if (there.count(name)) continue;
    ++moved;
    if (first.empty())
      first = fmt::format("'{}' absent there, at {} here", name, describe_place(place));
  }
  return Status::error(
      "checkpoint '{}' does not match this config: the flat parameter layout differs ({} of {} "
      "tensors elsewhere, e.g. {}), so its parameters, optimizer state and residual would land "
      "on other tensors. The layout is decided by the model and by the tensors that "
      "comm.dense_patterns and comm.min_compress_numel send dense (placed last): resume with "
      "the checkpoint's values{}",
      f.path, moved, std::max(there.size(), now.size()), first,
      changed_settings(f, config, {"model.", "comm.dense_patterns", "comm.min_compress_numel"}));
}

Status check_bucket_plan(const CheckpointFile& f, const BucketRanges& here,
                         const std::string& config) {
  const auto saved = f.meta.find("buckets");
  if (saved == f.meta.end()) return Status::ok();  // from before "buckets": as then
  SPARQ_ASSIGN_OR_RETURN(const BucketRanges there, parse_bucket_ranges(saved->second, f.path));
  if (there == here) return Status::ok();
  std::vector<std::string> stateful;
  for (const auto& [name, bytes] : f.sections) {
    if (name.starts_with("exchange/") && !bytes.empty()) stateful.push_back(name.substr(9));
  }
  if (stateful.empty()) return Status::ok();  // flat state only: any bucket plan resumes it
  std::size_t b = 0;
  while (b < there.size() && b < here.size() && there[b] == here[b]) ++b;
  const auto range = [](const BucketRanges& plan, std::size_t i) {
    return i < plan.size() ? fmt::format("{} floats at offset {}", plan[i].second, plan[i].first)
                           : std::string("none");
  };
  return Status::error(
      "checkpoint '{}' does not match this config: its bucket plan differs ({} buckets there, "
      "{} here; bucket {}: {} there, {} here), and its per-bucket compressor and aggregator "
      "state ({}) belongs to its buckets' ranges. The bucket plan is decided by comm.bucket_mb, "
      "comm.first_bucket_mb, comm.dense_patterns, comm.min_compress_numel and "
      "comm.split_tied_embedding: resume with the checkpoint's values{}",
      f.path, there.size(), here.size(), b, range(there, b), range(here, b),
      fmt::join(stateful, ", "),
      changed_settings(f, config,
                       {"comm.bucket_mb", "comm.first_bucket_mb", "comm.dense_patterns",
                        "comm.min_compress_numel", "comm.split_tied_embedding"}));
}

}  // namespace sparq::train
