#include "train/elastic_resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "compress/state_merge.h"
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

// Every "exchange/bucket<b>.<part>" section of old rank p's file goes to the merges of the same
// part whose bucket overlaps old bucket b (matched by flat range: the plans may differ).
Status feed_exchange_state(const CheckpointFile& f, const ElasticResumeInput& in,
                           const BucketRanges& old_buckets,
                           std::vector<compress::NamedStateMerge>& merges, int p) {
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
    if (dot == std::string::npos || b >= old_buckets.size()) {
      return Status::error(
          "{}: section '{}' names no bucket of the {} of the {}-rank plan "
          "(was the checkpoint written with other comm.* bucket settings?)",
          f.path, name, old_buckets.size(), in.old_world);
    }
    const std::string part = name.substr(dot + 1);
    const auto [offset, size] = old_buckets[b];
    const std::span<const std::uint8_t> state(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                              bytes.size());
    for (compress::NamedStateMerge& m : merges) {
      if (m.part != part || offset >= m.shape.offset + m.shape.size ||
          m.shape.offset >= offset + size) {
        continue;
      }
      SPARQ_RETURN_IF_ERROR(
          m.merge->add(p, offset, size, state).with_context(f.path + ": " + name));
    }
  }
  return Status::ok();
}


}  // namespace

Result<std::string> merge_elastic_checkpoint(const ElasticResumeInput& in) {
  const std::size_t count = in.sections.size();
  std::vector<compress::MeanAccumulator> means(count);
  std::vector<std::uint64_t> replicated_checksum(count, 0);
  std::vector<compress::NamedStateMerge> merges;
  if (in.exchange) merges = in.exchange->state_merges(in.old_world, in.rank, in.world);
  std::vector<float> staging;
  std::string step_of_rank0;
  BucketRanges old_buckets = in.old_buckets;

  // One old file at a time: what is kept across files is the double sums, rank 0's checksums
  // and what each state merge needs for this rank.
  for (int p = 0; p < in.old_world; ++p) {
    const std::string path = checkpoint_rank_file(in.dir, p);
    if (!std::filesystem::exists(path)) {
      return Status::error(
          "checkpoint '{}' was written by {} rank(s) but has no file for rank "
          "{} ({})",
          in.dir, in.old_world, p, path);
    }
    SPARQ_ASSIGN_OR_RETURN(CheckpointFile f, read_checkpoint_file(path));
    SPARQ_ASSIGN_OR_RETURN(std::string world, f.meta_value("world_size"));
    SPARQ_ASSIGN_OR_RETURN(std::string step, f.meta_value("step"));
    if (p == 0) step_of_rank0 = step;
    // The saving run's own bucket ranges: exact also when comm.bucket_mb & co. changed since.
    if (p == 0 && f.meta.count("buckets")) {
      SPARQ_ASSIGN_OR_RETURN(old_buckets, parse_bucket_ranges(f.meta.at("buckets"), path));
    }
    if (world != std::to_string(in.old_world) || step != step_of_rank0) {
      return Status::error(
          "{}: world_size {} and step {} do not match rank 0's ({} and {}): "
          "files of different runs in one checkpoint directory?",
          path, world, step, in.old_world, step_of_rank0);
    }
    for (std::size_t i = 0; i < count; ++i) {
      const ElasticSection& s = in.sections[i];
      if (s.rule == MergeRule::kReplicated) {
        SPARQ_ASSIGN_OR_RETURN(std::string_view bytes, f.section(s.section));
        const std::uint64_t sum = checksum64(bytes.data(), bytes.size());
        if (p == 0) {
          replicated_checksum[i] = sum;
          staging.resize(static_cast<std::size_t>(s.tensor.numel()));
          SPARQ_RETURN_IF_ERROR(f.read_floats(s.section, staging));
          store_floats(staging, s.tensor);
        } else if (sum != replicated_checksum[i]) {
          return Status::error(
              "checkpoint '{}': section '{}' ({}) differs between rank 0 and "
              "rank {} although it is replicated: refusing an elastic resume "
              "(resume on {} rank(s) to keep each rank's own)",
              in.dir, s.section, s.label, p, in.old_world);
        }
      } else {
        staging.resize(static_cast<std::size_t>(s.tensor.numel()));
        SPARQ_RETURN_IF_ERROR(f.read_floats(s.section, staging));
        SPARQ_RETURN_IF_ERROR(means[i].add(staging, s.section).with_context(in.dir));
      }
    }
    SPARQ_RETURN_IF_ERROR(feed_exchange_state(f, in, old_buckets, merges, p));
  }

  std::vector<std::pair<std::string, std::string>> parts;
  for (std::size_t i = 0; i < count; ++i) {
    const ElasticSection& s = in.sections[i];
    if (s.rule == MergeRule::kReplicated) {
      describe(parts, s.label, fmt::format("rank 0's (the same in all {} files)", in.old_world));
      continue;
    }
    staging.resize(static_cast<std::size_t>(s.tensor.numel()));
    means[i].finish(staging);
    store_floats(staging, s.tensor);
    describe(parts, s.label, fmt::format("kept (mean of {})", in.old_world));
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
    if (!merged.reset_reason.empty() && in.rank == 0 &&
        warned.insert(m.label + merged.reset_reason).second) {
      spdlog::warn("elastic resume from {} to {} ranks: {} reset to its initial value: {}",
                   in.old_world, in.world, m.label, merged.reset_reason);
    }
    merged_bytes.push_back(std::move(merged.bytes));
    std::vector<std::uint8_t>& bytes = merged_bytes.back();
    state.push_back(
        {m.name, Tensor(bytes.data(), DType::kU8, {static_cast<std::int64_t>(bytes.size())})});
  }
  if (in.exchange) {
    SPARQ_RETURN_IF_ERROR(in.exchange->load_state(state, in.rank, in.world).with_context(in.dir));
  }

  std::string summary;
  for (const auto& [label, rule] : parts) {
    summary += (summary.empty() ? "" : ", ") + label + " " + rule;
  }
  return summary;
}

}  // namespace sparq::train
