#include "comm/bucket_plan.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <unordered_map>

namespace sparq::comm {
namespace {

constexpr double kFloatsPerMiB = 1024.0 * 1024.0 / 4.0;

std::int64_t cap_floats(double mib) { return static_cast<std::int64_t>(mib * kFloatsPerMiB); }

// Cuts one region's tensors (fed in descending offset order) into buckets appended to `out`.
// Caps are in floats; 0 means no cap (per-layer mode, where callers force the boundaries).
class RegionCutter {
 public:
  RegionCutter(std::vector<Bucket>* out, bool dense, std::int64_t first_cap, std::int64_t cap)
      : out_(out), dense_(dense), first_cap_(first_cap), cap_(cap), start_(out->size()) {}

  void add(const ParamEntry& e, bool force_boundary) {
    if (e.numel == 0) return;
    if (force_boundary) close();
    if (current_cap() > 0 && open_count_ > 0 && open_count_ + e.numel > current_cap()) close();
    if (current_cap() > 0 && e.numel > current_cap()) {
      // Split from the tensor's end backwards so chunk 0 is what backward produces first.
      close();
      for (std::int64_t end = e.numel; end > 0;) {
        const std::int64_t begin = std::max<std::int64_t>(0, end - current_cap());
        open_low_ = e.offset + begin;
        open_count_ = end - begin;
        names_.push_back(e.spec.name);
        close();
        end = begin;
      }
      return;
    }
    open_low_ = e.offset;
    open_count_ += e.numel;
    names_.push_back(e.spec.name);
  }

  void close() {
    if (open_count_ == 0) return;
    Bucket b;
    b.index = static_cast<int>(out_->size());
    b.range = {open_low_, 0};  // the end is fixed up once all buckets are known
    b.ready_count = open_count_;
    b.tensors = std::move(names_);
    b.dense = dense_;
    out_->push_back(std::move(b));
    names_.clear();
    open_count_ = 0;
  }

  std::int64_t current_cap() const { return out_->size() == start_ ? first_cap_ : cap_; }

 private:
  std::vector<Bucket>* out_;
  bool dense_;
  std::int64_t first_cap_, cap_;
  std::size_t start_;  // index of this region's first bucket
  std::int64_t open_low_ = 0;
  std::int64_t open_count_ = 0;
  std::vector<std::string> names_;
};

}  // namespace

Status BucketPlanConfig::validate(const std::string& prefix) const {
  // An upper bound keeps cap_floats' double -> int64 conversion defined (1 TiB of floats
  // is far beyond any model); below one float a cap of 0 would mean "no cap".
  constexpr double kMaxMb = 1 << 20;
  if (!(first_bucket_mb > 0.0 && first_bucket_mb <= kMaxMb)) {
    return Status::error("{}first_bucket_mb: must be in (0, {}], got {}", prefix, kMaxMb,
                         first_bucket_mb);
  }
  if (cap_floats(first_bucket_mb) < 1) {
    return Status::error("{}first_bucket_mb: {} MiB holds less than one float", prefix,
                         first_bucket_mb);
  }
  if (!(bucket_mb >= 0.0 && bucket_mb <= kMaxMb)) {
    return Status::error("{}bucket_mb: must be in [0, {}] (0: one bucket per layer), got {}",
                         prefix, kMaxMb, bucket_mb);
  }
  if (bucket_mb > 0.0 && cap_floats(bucket_mb) < 1) {
    return Status::error("{}bucket_mb: {} MiB holds less than one float", prefix, bucket_mb);
  }
  if (min_compress_numel < 0) {
    return Status::error("{}min_compress_numel: must be >= 0, got {}", prefix, min_compress_numel);
  }
  for (const auto& p : dense_patterns) {
    if (p.empty()) return Status::error("{}dense_patterns: empty pattern", prefix);
  }
  return Status::ok();
}

Status BucketPlanConfig::check_patterns_match(const ParamStore& store,
                                              const std::string& prefix) const {
  for (const std::string& p : dense_patterns) {
    const auto matches = [&](const ParamEntry& e) {
      return fnmatch(p.c_str(), e.spec.name.c_str(), 0) == 0;
    };
    if (std::any_of(store.entries().begin(), store.entries().end(), matches)) continue;
    std::string names;
    const std::size_t shown = std::min<std::size_t>(store.entries().size(), 6);
    for (std::size_t i = 0; i < shown; ++i) {
      names += (i ? ", " : "") + store.entries()[i].spec.name;
    }
    if (shown < store.entries().size()) names += ", ...";
    return Status::error(
        "{}dense_patterns: '{}' matches no parameter of this model ({}), so "
        "it sends nothing dense: a typo? (remove it if the model has no such "
        "tensors)",
        prefix, p, names);
  }
  return Status::ok();
}

bool BucketPlanConfig::is_dense(const ParamSpec& spec) const {
  if (spec.shape.numel() < min_compress_numel) return true;
  for (const auto& p : dense_patterns) {
    if (fnmatch(p.c_str(), spec.name.c_str(), 0) == 0) return true;
  }
  return false;
}

Result<BucketPlan> BucketPlan::build(const ParamStore& store,
                                     const std::vector<LayerParams>& layers,
                                     const BucketPlanConfig& config) {
  SPARQ_RETURN_IF_ERROR(config.validate());
  if (!store.allocated()) return Status::error("bucket plan needs an allocated ParamStore");
  if (store.entries().empty()) return Status::error("bucket plan: the model has no parameters");

  std::unordered_map<std::string, int> layer_of;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    for (const auto& t : layers[l].tensors) {
      if (!store.contains(t)) {
        return Status::error("layer '{}' names unknown parameter '{}'", layers[l].name, t);
      }
      if (!layer_of.emplace(t, static_cast<int>(l)).second) {
        return Status::error("parameter '{}' is claimed by two layers", t);
      }
    }
  }
  for (const std::string& name : config.isolated) {
    if (!store.contains(name)) {
      return Status::error("bucket plan: isolated tensor '{}' is not a parameter", name);
    }
  }
  const auto isolated = [&](const ParamEntry& e) {
    return std::find(config.isolated.begin(), config.isolated.end(), e.spec.name) !=
           config.isolated.end();
  };
  const bool per_layer = config.bucket_mb == 0.0;
  if (per_layer && layer_of.size() != store.entries().size()) {
    for (const auto& e : store.entries()) {
      if (!layer_of.count(e.spec.name)) {
        return Status::error(
            "bucket_mb: 0 (one bucket per layer) needs every parameter in a "
            "layer, but '{}' is in none",
            e.spec.name);
      }
    }
  }

  // Both regions in descending offset order; the dense ones must sit above the others.
  std::vector<const ParamEntry*> compressed, dense;
  for (const auto& e : store.entries())
    (config.is_dense(e.spec) ? dense : compressed).push_back(&e);
  auto by_offset_desc = [](const ParamEntry* a, const ParamEntry* b) {
    return a->offset > b->offset;
  };
  std::sort(compressed.begin(), compressed.end(), by_offset_desc);
  std::sort(dense.begin(), dense.end(), by_offset_desc);
  if (!dense.empty() && !compressed.empty() && dense.back()->offset < compressed.front()->offset) {
    return Status::error(
        "the ParamStore was not allocated with the bucket plan's dense "
        "predicate: dense tensor '{}' lies below compressed tensor '{}'",
        dense.back()->spec.name, compressed.front()->spec.name);
  }

  BucketPlan plan;
  for (int region = 0; region < 2; ++region) {
    const auto& tensors = region == 0 ? compressed : dense;
    // The small first bucket gets backward's first gradients on the wire early; the dense
    // region's tensors are spread over every layer, so its buckets are ready late whatever
    // their size, and it uses the ordinary cap throughout.
    const std::int64_t cap = per_layer ? 0 : cap_floats(config.bucket_mb);
    const std::int64_t first_cap =
        per_layer ? 0 : (region == 0 ? cap_floats(config.first_bucket_mb) : cap);
    RegionCutter cutter(&plan.buckets_, region == 1, first_cap, cap);
    int previous_layer = -1;
    for (const ParamEntry* e : tensors) {
      // An empty tensor holds no gradient and belongs to no bucket, so it must not count as
      // the layer seen last either: per layer, the next tensor's boundary is judged against
      // the previous tensor that has elements (a zero-size tensor between two layers merged
      // them: review, 2026-12-06).
      if (e->numel == 0) continue;
      const int layer = layer_of.count(e->spec.name) ? layer_of.at(e->spec.name) : -1;
      const bool alone = isolated(*e);
      cutter.add(*e, alone || (per_layer && previous_layer != -1 && layer != previous_layer));
      if (alone) cutter.close();
      previous_layer = layer;
    }
    cutter.close();
  }
  // Each bucket ends where the bucket before it (higher in memory) begins, so the ranges tile
  // the layout; the top compressed bucket ends at the dense region and the top dense bucket at
  // the end of the buffer.
  std::int64_t end = store.flat_numel();
  std::int64_t dense_start = store.flat_numel();
  for (const auto& b : plan.buckets_) {
    if (b.dense) dense_start = std::min(dense_start, b.range.offset);
  }
  bool first_compressed = true, first_dense = true;
  for (auto& b : plan.buckets_) {
    if (!b.dense && first_compressed) {
      end = dense_start;
      first_compressed = false;
    }
    if (b.dense && first_dense) {
      end = store.flat_numel();
      first_dense = false;
    }
    b.range.count = end - b.range.offset;
    end = b.range.offset;
  }
  return plan;
}

std::vector<std::pair<int, std::int64_t>> BucketPlan::overlaps(ParamRange range) const {
  std::vector<std::pair<int, std::int64_t>> out;
  for (const auto& b : buckets_) {
    const std::int64_t lo = std::max(b.range.offset, range.offset);
    const std::int64_t hi = std::min(b.range.end(), range.end());
    if (hi > lo) out.emplace_back(b.index, hi - lo);
  }
  return out;
}

std::string BucketPlan::describe(const std::function<std::string(int)>& compressor) const {
  std::string s = fmt::format("{:>6} {:<10} {:>12} {:>9} {:>7}  {:<22} {}\n", "bucket", "kind",
                              "offset", "MiB", "tensors", "compressor", "last .. first tensor");
  for (const auto& b : buckets_) {
    s += fmt::format("{:>6} {:<10} {:>12} {:>9.3f} {:>7}  {:<22} {} .. {}\n", b.index,
                     b.dense ? "dense" : "compressed", b.range.offset,
                     static_cast<double>(b.range.count) * 4.0 / (1 << 20), b.tensors.size(),
                     compressor ? compressor(b.index) : "-", b.tensors.front(), b.tensors.back());
  }
  return s + fmt::format("{} buckets", buckets_.size());
}

}  // namespace sparq::comm
