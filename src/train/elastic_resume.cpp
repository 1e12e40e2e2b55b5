#include "train/elastic_resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "compress/byte_io.h"
#include "compress/state_merge.h"
#include "compress/two_phase_aggregator.h"
#include "core/checksum.h"
#include "core/tensor_copy.h"
#include "train/checkpoint.h"
#include "train/train_config.h"

namespace sparq::train {
namespace {

// What a section's merged floats are written through: host tensors directly, device tensors
// through one staging vector.
void store_floats(const std::vector<float>& host, const Tensor& t) {
  if (t.is_cpu()) {
    std::copy(host.begin(), host.end(), t.data<float>());
  } else {
    copy_from_host(host.data(), t);
  }
}

// The rules of the float sections as the log reports them, grouped by label in first-seen
// order: "parameters rank 0's (the same in all 2 files)".
void describe(std::vector<std::pair<std::string, std::string>>& parts, const std::string& label,
              const std::string& rule) {
  for (const auto& [l, r] : parts) {
    if (l == label && r == rule) return;
  }
  parts.emplace_back(label, rule);
}

std::string meta_or_empty(const CheckpointFile& f, const std::string& key) {
  const auto it = f.meta.find(key);
  return it == f.meta.end() ? std::string() : it->second;
}

// What the exchange sections of the old files become, besides the merges' inputs: Note [Mass
// the new plan does not carry] in elastic_resume.h.
struct ExchangeFeed {
  const ElasticResumeInput& in;
  BucketRanges old_buckets;
  std::vector<std::string> old_aggregations;  // rank 0's "aggregations"; empty: unknown
  std::vector<compress::NamedStateMerge>& merges;
  // Two_phase server residual that no two_phase takes here, by flat position (sized on first
  // use), and the new buckets it lies in.
  std::vector<double> server;
  std::set<std::size_t> server_buckets;
  // State that nothing here can take: "<what> state" -> why, for one warning each.
  std::map<std::string, std::string> dropped;
};

// The new bucket whose range `m` merges into (merges exist for compressed buckets only).
std::size_t new_bucket_of(const ElasticResumeInput& in, const compress::NamedStateMerge& m) {
  for (std::size_t k = 0; k < in.new_buckets.size(); ++k) {
    if (in.new_buckets[k].first == m.shape.offset && in.new_buckets[k].second == m.shape.size) {
      return k;
    }
  }
  return in.new_buckets.size();
}

// Every "exchange/bucket<b>.<part>" section of old rank p's file goes to the merges of the same
// part whose bucket overlaps old bucket b (matched by flat range: the plans may differ); an
// aggregator's state only to a bucket aggregated here by the strategy that saved it. What no
// merge takes is folded (two_phase's server residual) or dropped with a warning.
Status feed_exchange_state(const CheckpointFile& f, ExchangeFeed& feed, int p) {
  const ElasticResumeInput& in = feed.in;
  const std::string prefix = "exchange/bucket";
  for (const auto& [name, bytes] : f.sections) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::size_t dot = name.find('.', prefix.size());
    std::size_t b = 0;
    try {
      b = std::stoul(name.substr(prefix.size(), dot - prefix.size()));
    } catch (const std::exception&) {
      return Status::error("{}: unexpected section '{}'", f.path, name);
    }
    if (dot == std::string::npos || b >= feed.old_buckets.size()) {
      return Status::error(
          "{}: section '{}' names no bucket of the {} of the {}-rank plan "
          "(was the checkpoint written with other comm.* bucket settings?)",
          f.path, name, feed.old_buckets.size(), in.old_world);
    }
    const std::string part = name.substr(dot + 1);
    const auto [offset, size] = feed.old_buckets[b];
    const std::span<const std::uint8_t> state(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                              bytes.size());
    const bool aggregator = part == "aggregator";
    const std::string saved =
        b < feed.old_aggregations.size() ? feed.old_aggregations[b] : std::string();
    // New buckets of this range that took the state, so that the rest can be accounted for.
    std::set<std::size_t> taken;
    for (compress::NamedStateMerge& m : feed.merges) {
      if (m.part != part || offset >= m.shape.offset + m.shape.size ||
          m.shape.offset >= offset + size) {
        continue;
      }
      const std::size_t k = new_bucket_of(in, m);
      if (aggregator && !saved.empty() && k < in.new_aggregations.size() &&
          in.new_aggregations[k] != saved) {
        continue;  // another strategy's state means nothing to this one
      }
      taken.insert(k);
      SPARQ_RETURN_IF_ERROR(
          m.merge->add(p, offset, size, state).with_context(f.path + ": " + name));
    }
    if (state.empty()) continue;
    std::vector<float> region;
    for (std::size_t k = 0; k < in.new_buckets.size(); ++k) {
      const auto [new_offset, new_size] = in.new_buckets[k];
      if (taken.count(k) || offset >= new_offset + new_size || new_offset >= offset + size) {
        continue;
      }
      const std::string here =
          k < in.new_aggregations.size() ? in.new_aggregations[k] : std::string("none");
      if (aggregator && saved == "two_phase") {
        // Old rank p owned region p of the old bucket: [offset + p size / P, ...).
        const std::size_t rb = offset + compress::two_phase_region_begin(size, in.old_world, p);
        const std::size_t re = offset + compress::two_phase_region_begin(size, in.old_world, p + 1);
        SPARQ_RETURN_IF_ERROR(compress::load_floats(state, region, "two_phase server residual")
                                  .with_context(f.path + ": " + name));
        if (region.size() != re - rb) {
          return Status::error("{}: {}: two_phase server residual of {} floats for a region of {}",
                               f.path, name, region.size(), re - rb);
        }
        if (feed.server.empty()) {
          std::size_t flat = 0;
          for (const auto& [o, c] : in.new_buckets) flat = std::max(flat, o + c);
          feed.server.assign(flat, 0.0);
        }
        for (std::size_t x = std::max(rb, new_offset); x < std::min(re, new_offset + new_size);
             ++x) {
          feed.server[x] += region[x - rb];
        }
        if (here != "none") feed.server_buckets.insert(k);  // dense: dropped with the residual
        continue;
      }
      const std::string what =
          aggregator ? (saved.empty() ? std::string("aggregator") : saved + " aggregator")
                     : meta_or_empty(f, "compressor") + " compressor";
      feed.dropped.emplace(
          what + " state",
          here == "none"
              ? fmt::format("bucket {} is sent dense on {} rank(s) and keeps no such state", k,
                            in.world)
              : fmt::format("bucket {} is aggregated by {} on {} rank(s), which cannot take it", k,
                            here, in.world));
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::string> merge_elastic_checkpoint(const ElasticResumeInput& in) {
  const std::size_t count = in.sections.size();
  std::vector<compress::MeanAccumulator> means(count);
  std::vector<std::uint64_t> replicated_checksum(count, 0);
  std::vector<int> missing(count, 0);  // old files without the section (may_be_missing)
  std::vector<compress::NamedStateMerge> merges;
  if (in.exchange) merges = in.exchange->state_merges(in.old_world, in.rank, in.world);
  ExchangeFeed feed{in, {}, {}, merges, {}, {}, {}};
  std::vector<float> staging;
  std::string step_of_rank0;
  // Rank 0's warnings go to the caller's list when it keeps one (ElasticResumeInput::warnings).
  const auto warn = [&in](std::string line) {
    if (in.rank != 0) return;
    if (in.warnings != nullptr) {
      in.warnings->push_back(std::move(line));
    } else {
      spdlog::warn("{}", line);
    }
  };

  // One old file at a time: what is kept across files is the double sums, rank 0's checksums
  // and what each state merge needs for this rank.
  for (int p = 0; p < in.old_world; ++p) {
    const std::string path = checkpoint_rank_file(in.dir, p);
    std::error_code ec;  // the throwing form ends the job on EACCES (std::terminate)
    const bool exists = std::filesystem::exists(path, ec);
    if (ec) {
      // A file that cannot be looked up (a symlink loop, EACCES on the directory) was reported
      // as missing (review, 2026-12-08).
      return Status::error("checkpoint '{}': cannot look up the file of rank {} ({}): {}", in.dir,
                           p, path, ec.message());
    }
    if (!exists) {
      return Status::error(
          "checkpoint '{}' was written by {} rank(s) but has no file for rank "
          "{} ({})",
          in.dir, in.old_world, p, path);
    }
    SPARQ_ASSIGN_OR_RETURN(CheckpointFile f, read_checkpoint_file(path));
    SPARQ_ASSIGN_OR_RETURN(std::string world, f.meta_value("world_size"));
    SPARQ_ASSIGN_OR_RETURN(std::string step, f.meta_value("step"));
    SPARQ_RETURN_IF_ERROR(check_file_rank(f, path, p));
    if (p == 0) {
      step_of_rank0 = step;
      // The saving run's own bucket ranges: exact also when comm.bucket_mb & co. changed
      // since. Only a file without them has the old plan rebuilt from this config.
      if (f.meta.count("buckets")) {
        SPARQ_ASSIGN_OR_RETURN(feed.old_buckets, parse_bucket_ranges(f.meta.at("buckets"), path));
      } else if (in.rebuild_old_buckets) {
        SPARQ_ASSIGN_OR_RETURN(feed.old_buckets, in.rebuild_old_buckets());
      }
      feed.old_aggregations = saved_aggregations(f);
    }
    if (world != std::to_string(in.old_world) || step != step_of_rank0) {
      return Status::error(
          "{}: world_size {} and step {} do not match rank 0's ({} and {}): "
          "files of different runs in one checkpoint directory?",
          path, world, step, in.old_world, step_of_rank0);
    }
    for (std::size_t i = 0; i < count; ++i) {
      const ElasticSection& s = in.sections[i];
      const bool absent = s.may_be_missing && !f.has_section(s.section);
      if (absent) ++missing[i];
      if (s.rule == MergeRule::kReplicated) {
        // Every file has it, or none (then zeros: the state as a fresh run starts it).
        // Absent here: absent from every file so far; present: from none. (It compared
        // against "all absent so far" alone, so a section missing from rank 0's file only was
        // refused as differing bytes; review, 2026-12-07.)
        if (p > 0 && (absent ? missing[i] != p + 1 : missing[i] != 0)) {
          return Status::error(
              "checkpoint '{}': section '{}' ({}) is in rank {}'s file and not in rank {}'s "
              "although it is replicated: refusing an elastic resume",
              in.dir, s.section, s.label, absent ? 0 : p, absent ? p : 0);
        }
        if (absent) continue;
        SPARQ_ASSIGN_OR_RETURN(std::string_view bytes, f.section(s.section));
        const std::uint64_t sum = mixed_hash64(bytes.data(), bytes.size());
        if (p == 0) {
          replicated_checksum[i] = sum;
          staging.resize(static_cast<std::size_t>(s.tensor.numel()));
          SPARQ_RETURN_IF_ERROR(f.read_floats(s.section, staging));
          store_floats(staging, s.tensor);
        } else if (sum != replicated_checksum[i]) {
          return Status::error(
              "checkpoint '{}': section '{}' ({}) differs between rank 0 and "
              "rank {} although it is replicated: a rank file is damaged or from another "
              "run; resume from an earlier step",
              in.dir, s.section, s.label, p);
        }
      } else if (absent) {
        SPARQ_RETURN_IF_ERROR(means[i].add(std::span<const float>(), s.section));  // zeros
      } else {
        staging.resize(static_cast<std::size_t>(s.tensor.numel()));
        SPARQ_RETURN_IF_ERROR(f.read_floats(s.section, staging));
        SPARQ_RETURN_IF_ERROR(means[i].add(staging, s.section).with_context(in.dir));
      }
    }
    SPARQ_RETURN_IF_ERROR(feed_exchange_state(f, feed, p));
  }

  std::vector<std::pair<std::string, std::string>> parts;
  std::optional<std::size_t> zeroed_residual_part;  // parts' entry of a residual started at 0
  bool residual_merged = false;
  for (std::size_t i = 0; i < count; ++i) {
    const ElasticSection& s = in.sections[i];
    const bool folds = s.section == in.residual_section && !feed.server.empty();
    if (missing[i] == in.old_world && !folds) {
      staging.assign(static_cast<std::size_t>(s.tensor.numel()), 0.0f);
      store_floats(staging, s.tensor);
      if (s.section == in.residual_section) zeroed_residual_part = parts.size();
      describe(parts, s.label, "started from zeros (not in the checkpoint)");
      continue;
    }
    if (s.rule == MergeRule::kReplicated) {
      describe(parts, s.label, fmt::format("rank 0's (the same in all {} files)", in.old_world));
      continue;
    }
    staging.resize(static_cast<std::size_t>(s.tensor.numel()));
    if (s.section != in.residual_section) {
      means[i].finish(staging);
      store_floats(staging, s.tensor);
      describe(parts, s.label, fmt::format("kept (mean of {})", in.old_world));
      continue;
    }
    residual_merged = true;
    std::string rule = fmt::format("kept (mean of {}", in.old_world);
    if (!feed.server.empty()) {
      if (in.server_residual_folded) *in.server_residual_folded = true;
      feed.server.resize(staging.size(), 0.0);  // the buckets may end before the layout
      means[i].finish(staging, feed.server);
      rule += fmt::format(", plus the two_phase server residual of bucket(s) {}",
                          fmt::join(feed.server_buckets, ", "));
    } else {
      means[i].finish(staging);
    }
    const std::string dropped =
        drop_stranded_residual(staging, in.new_buckets, in.new_aggregations);
    store_floats(staging, s.tensor);
    if (!dropped.empty()) {
      rule += "; dropped in the buckets sent dense here, see the warning";
      warn("elastic resume: " + dropped);
    }
    describe(parts, s.label, rule + ")");
  }
  if (!feed.server_buckets.empty()) {
    describe(parts, "two_phase aggregator state",
             residual_merged ? fmt::format("folded into the residual (bucket(s) {} not "
                                           "aggregated by two_phase here)",
                                           fmt::join(feed.server_buckets, ", "))
                             : "dropped (see the warning)");
  }
  if (!residual_merged && !feed.server.empty()) {
    double mass = 0;
    for (double x : feed.server) mass += std::fabs(x);
    if (mass > 0) {
      warn(fmt::format(
          "elastic resume from {} to {} ranks: the old two_phase server residual (sum |s| = "
          "{:.6g}) is dropped, never applied: bucket(s) {} aggregate otherwise here and this "
          "run keeps no error-feedback residual to fold it into (compress.error_feedback)",
          in.old_world, in.world, mass, fmt::join(feed.server_buckets, ", ")));
    }
  }
  for (const auto& [what, why] : feed.dropped) {
    describe(parts, what, "dropped (see the warning)");
    warn(fmt::format("elastic resume from {} to {} ranks: the old {} is dropped: {}", in.old_world,
                     in.world, what, why));
  }

  // The merged exchange state, loaded as if saved by this rank.
  std::vector<std::vector<std::uint8_t>> merged_bytes;
  std::vector<StateTensor> state;
  std::set<std::string> warned;
  merged_bytes.reserve(merges.size());
  for (compress::NamedStateMerge& m : merges) {
    auto finished = m.merge->finish();
    if (!finished.is_ok()) return finished.status().with_context(in.dir + ": " + m.name);
    compress::MergedState merged = std::move(finished).value();
    if (!merged.stateless()) describe(parts, m.label, merged.rule);
    if (!merged.reset_reason.empty() && warned.insert(m.label + merged.reset_reason).second) {
      warn(fmt::format("elastic resume from {} to {} ranks: {} reset to its initial value: {}",
                       in.old_world, in.world, m.label, merged.reset_reason));
    }
    merged_bytes.push_back(std::move(merged.bytes));
    std::vector<std::uint8_t>& bytes = merged_bytes.back();
    state.push_back(
        {m.name, Tensor(bytes.data(), DType::kU8, {static_cast<std::int64_t>(bytes.size())})});
  }
  if (in.exchange) {
    SPARQ_RETURN_IF_ERROR(in.exchange->load_state(state, in.rank, in.world).with_context(in.dir));
    // A two_phase bucket here took its server residual as re-partitioned; with server
    // compression off it is folded into the residual next (Trainer::fold_server_residual),
    // which "started from zeros" alone contradicted (review, 2026-12-08).
    if (zeroed_residual_part && in.exchange->holds_loaded_server_residual()) {
      parts[*zeroed_residual_part].second += ", then took the two_phase server residual";
    }
  }

  std::string summary;
  for (const auto& [label, rule] : parts) {
    summary += (summary.empty() ? "" : ", ") + label + " " + rule;
  }
  return summary;
}

std::string drop_stranded_residual(std::span<float> residual, const BucketRanges& buckets,
                                   const std::vector<std::string>& aggregations) {
  double total = 0, dropped = 0;
  for (float x : residual) total += std::fabs(x);
  std::vector<std::string> named;
  for (std::size_t b = 0; b < buckets.size() && b < aggregations.size(); ++b) {
    const auto [offset, size] = buckets[b];
    if (aggregations[b] != "none" || offset + size > residual.size()) continue;
    double mass = 0;
    for (float& x : residual.subspan(offset, size)) {
      mass += std::fabs(x);
      x = 0.0f;
    }
    if (mass == 0) continue;
    named.push_back(fmt::format("bucket {} (sum |e| = {:.6g})", b, mass));
    dropped += mass;
  }
  if (named.empty()) return "";
  return fmt::format(
      "the error-feedback residual of {} is dropped, never applied: this run's plan sends "
      "those buckets dense and keeps no residual for them (comm.plan: auto chooses per world "
      "size; {:.3g}% of the residual's sum |e| = {:.6g})",
      fmt::join(named, ", "), 100.0 * dropped / total, total);
}

}  // namespace sparq::train
