// The layout and bucket-range records of a checkpoint and the resume checks on them (Note
// [Layouts in the checkpoint], checkpointing.cpp).
#include "train/checkpoint_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "models/config.h"
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

std::vector<std::string> saved_aggregations(const CheckpointFile& f) {
  std::vector<std::string> out;
  const auto it = f.meta.find("aggregations");
  if (it == f.meta.end()) return out;
  std::istringstream names(it->second);
  for (std::string name; std::getline(names, name, ',');) out.push_back(name);
  return out;
}

namespace {

// Why a state is absent or dropped: the settings that decide it which changed
// ("compress.error_feedback: false -> true"), or what the saving run's plan did.
std::string presence_reason(const CheckpointFile& f, const std::string& section,
                            const std::string& config) {
  const bool residual = section == "residual";
  const std::string changed =
      residual ? changed_settings(f, config, {"compress.error_feedback", "compress.name"})
               : changed_settings(f, config, {"optim.momentum", "optim.name"});
  constexpr std::string_view kLead = "; changed here: ";
  if (!changed.empty()) return changed.substr(kLead.size());
  const std::vector<std::string> kinds = saved_aggregations(f);
  if (residual && !kinds.empty() &&
      std::all_of(kinds.begin(), kinds.end(), [](const std::string& k) { return k == "none"; })) {
    return "comm.plan: auto sent every bucket dense on the saving run's world size";
  }
  return residual ? "compress.error_feedback is off, or nothing is compressed" : "optim.momentum";
}

std::string describe_state(const std::string& section) {
  return section == "residual" ? std::string("error-feedback residual")
                               : "optimizer state '" + section.substr(6) + "'";
}

}  // namespace

StatePresence state_presence(const CheckpointFile& f, const std::vector<std::string>& kept) {
  StatePresence out;
  for (const std::string& name : kept) {
    if (!f.has_section(name)) out.absent.push_back(name);
  }
  for (const auto& [name, bytes] : f.sections) {
    if ((name == "residual" || name.starts_with("optim/")) &&
        std::find(kept.begin(), kept.end(), name) == kept.end()) {
      out.dropped.push_back(name);
    }
  }
  return out;
}

std::vector<std::string> state_presence_warnings(const StatePresence& presence,
                                                 const CheckpointFile& f,
                                                 const std::string& config) {
  std::vector<std::string> out;
  for (const std::string& section : presence.absent) {
    if (section == "residual") continue;  // absent_residual_lines
    out.push_back(fmt::format(
        "resume: the checkpoint holds no {} ({}): it starts from zeros, as in a fresh run",
        describe_state(section), presence_reason(f, section, config)));
  }
  for (const std::string& section : presence.dropped) {
    // The mass still owed by error feedback is not applied anywhere: said as such.
    out.push_back(
        fmt::format("resume: the checkpoint's {} is dropped, since this run keeps none ({}){}",
                    describe_state(section), presence_reason(f, section, config),
                    section == "residual" ? "; what it still owed is never applied" : ""));
  }
  return out;
}

AbsentResidualLines absent_residual_lines(const StatePresence& presence, const CheckpointFile& f,
                                          const std::string& config) {
  if (std::find(presence.absent.begin(), presence.absent.end(), "residual") ==
      presence.absent.end()) {
    return {};
  }
  const std::string head =
      fmt::format("resume: the checkpoint holds no {} ({})", describe_state("residual"),
                  presence_reason(f, "residual", config));
  return {head + ": it starts from zeros, as in a fresh run",
          head +
              ": it starts from the two_phase server residual folded into it, zeros "
              "elsewhere"};
}

Status check_model(const CheckpointFile& f, const std::string& here) {
  SPARQ_ASSIGN_OR_RETURN(const std::string there, f.meta_value("model"));
  if (there == here) return Status::ok();
  const auto refuse = [&](const std::string& why) {
    return Status::error(
        "checkpoint '{}' does not match this config: {}model is '{}' there and '{}' here", f.path,
        why, there, here);
  };
  Result<ModelConfig> saved = parse_model_spec(there), now = parse_model_spec(here);
  if (!saved.is_ok())
    return refuse(fmt::format("its spec does not read back ({}): ", saved.status().message()));
  if (!now.is_ok()) return refuse("");
  static const std::set<std::string_view> kFree = {"preset",   "dropout",    "attn_dropout",
                                                   "init_std", "fused_head", "ln_eps",
                                                   "bn_eps",   "bn_momentum"};
  std::vector<std::string> differ;
  for (const std::string& field : differing_model_fields(*saved, *now)) {
    if (!kFree.count(field)) differ.push_back(field);
  }
  if (differ.empty()) return Status::ok();
  return refuse(
      fmt::format("{} differ{}: ", fmt::join(differ, ", "), differ.size() == 1 ? "s" : ""));
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

Status check_bucket_kinds(const CheckpointFile& f, const std::vector<std::string>& here,
                          const std::string& config) {
  const std::vector<std::string> there = saved_aggregations(f);
  // From before "aggregations" (load_state's order check is all that guards it), or another
  // number of buckets (check_bucket_plan's case).
  if (there.size() != here.size()) return Status::ok();
  const auto kind = [](const std::string& strategy) {
    return strategy == "none" ? std::string("sent dense")
                              : fmt::format("compressed ({})", strategy);
  };
  std::vector<std::string> changed;
  for (std::size_t b = 0; b < there.size(); ++b) {
    if ((there[b] == "none") == (here[b] == "none")) continue;
    changed.push_back(
        fmt::format("bucket {}: {} there, {} here", b, kind(there[b]), kind(here[b])));
  }
  if (changed.empty()) return Status::ok();
  return Status::error(
      "checkpoint '{}' does not match this config: its buckets travel otherwise ({}), and a "
      "resume on the same world size loads each bucket's error-feedback residual and "
      "compressor state as it was saved. Which buckets are compressed is chosen by comm.plan: "
      "auto from comm.plan_profile, comm.plan_network, comm.plan_min_compression and the "
      "compress settings it prices, for the world size: resume with the checkpoint's values{}",
      f.path, fmt::join(changed, "; "),
      // The plan's inputs: the profile and link, and the compressor's settings it prices.
      changed_settings(f, config, {"comm.plan", "compress."}));
}

}  // namespace sparq::train
