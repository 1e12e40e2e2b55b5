#include "core/param_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "core/rng.h"

#ifdef SPARQ_HAS_CUDA
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#include "core/cuda/sync_copy.h"
#endif

namespace sparq {

void ParamStore::add(ParamSpec spec) {
  SPARQ_CHECK(!allocated_, "cannot add parameter '{}' after allocate()", spec.name);
  SPARQ_CHECK(!spec.name.empty(), "parameter name must not be empty");
  SPARQ_CHECK(index_.count(spec.name) == 0, "duplicate parameter name '{}'", spec.name);
  ParamEntry e;
  e.numel = spec.shape.numel();
  e.spec = std::move(spec);
  index_.emplace(e.spec.name, entries_.size());
  entries_.push_back(std::move(e));
}

namespace {
// n rounded up to the alignment into *out; false where that passes INT64_MAX.
bool align_up(std::int64_t n, std::int64_t* out) {
  if (__builtin_add_overflow(n, ParamStore::kAlignFloats - 1, out)) return false;
  *out = *out / ParamStore::kAlignFloats * ParamStore::kAlignFloats;
  return true;
}
}  // namespace

void ParamStore::allocate(const ExecContext& context, const PlacementPredicate& place_last) {
  freeze_layout(place_last);
  const auto bytes = static_cast<std::size_t>(flat_numel_) * sizeof(float);
  context_ = &context;
  if (context.device() == Device::kCPU) {
    params_ = Buffer::host(bytes, /*zeroed=*/true);
    grads_ = Buffer::host(bytes, /*zeroed=*/true);
  } else {
    params_ = Buffer::device(bytes, /*zeroed=*/true);
    grads_ = Buffer::device(bytes, /*zeroed=*/true);
  }
}

void ParamStore::lay_out(const PlacementPredicate& place_last) {
  freeze_layout(place_last);
  layout_only_ = true;
}

void ParamStore::check_buffers(const char* what) const {
  SPARQ_CHECK(allocated_, "{} before allocate()", what);
  SPARQ_CHECK(!layout_only_, "{} of a store that holds a layout only (lay_out())", what);
}

void ParamStore::freeze_layout(const PlacementPredicate& place_last) {
  SPARQ_CHECK(!allocated_, "ParamStore::allocate() or lay_out() called twice");
  // The predicate is asked once per tensor: asked again in the second pass, one that answered
  // differently (stateful, or reading state that changed) left a tensor in neither pass, at
  // offset 0 over another (review, 2026-12-06).
  std::vector<bool> last(entries_.size(), false);
  if (place_last) {
    for (std::size_t i = 0; i < entries_.size(); ++i) last[i] = place_last(entries_[i].spec);
  }
  // Two passes: tensors kept in place, then those placed last; forward order within each.
  std::int64_t cursor = 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) place_last_offset_ = cursor;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (last[i] != (pass == 1)) continue;
      ParamEntry& e = entries_[i];
      e.offset = cursor;
      // The aligned end and its size in bytes must not wrap: a tensor of 2^62 + 16 floats
      // wrapped the buffers to 256 bytes, and allocate() succeeded (review, 2026-12-06). The
      // cursor only grows, so the last tensor's check covers the whole layout.
      std::int64_t end = 0, bytes = 0;
      const bool fits = !__builtin_add_overflow(e.offset, e.numel, &end) &&
                        align_up(end, &cursor) &&
                        !__builtin_mul_overflow(cursor, std::int64_t{sizeof(float)}, &bytes);
      SPARQ_CHECK(fits,
                  "parameter '{}' of shape {} ({} floats) at offset {} takes the flat layout "
                  "past 2^63 bytes",
                  e.spec.name, e.spec.shape.str(), e.numel, e.offset);
    }
  }
  // The end is padded too, so a range of the last tensor may be read in aligned widths.
  flat_numel_ = cursor;
  allocated_ = true;
}

void ParamStore::initialize(std::uint64_t seed) {
  check_buffers("ParamStore::initialize()");
  // Initialise on the host so CPU and CUDA runs start from bit-identical weights.
  Buffer staging;
  float* host = params();
  if (device() != Device::kCPU) {
    staging = Buffer::host(static_cast<std::size_t>(flat_numel_) * sizeof(float), true);
    host = staging.as<float>();
  }
  // A tensor's draws are addressed by a 32-bit hash of its name: two random tensors whose
  // names collide would start from the same values, so that is refused (review, 2026-12-05;
  // about one chance in 2^32 / n^2, and a rename fixes it).
  std::unordered_map<std::uint32_t, const std::string*> random_streams;
  for (const ParamEntry& e : entries_) {
    const std::uint32_t stream = hash_name(e.spec.name.c_str());
    const Init::Kind kind = e.spec.init.kind;
    if (kind != Init::Kind::kZeros && kind != Init::Kind::kOnes && kind != Init::Kind::kConstant) {
      const auto [it, fresh] = random_streams.emplace(stream, &e.spec.name);
      SPARQ_CHECK(fresh,
                  "parameters '{}' and '{}' hash to the same initialisation stream {:#x}: they "
                  "would start from the same random values; rename one",
                  *it->second, e.spec.name, stream);
    }
    Tensor view(host + e.offset, DType::kF32, e.spec.shape);
    apply_init(e.spec.init, view, seed, make_stream(RngPurpose::kInit, 0, stream));
  }
#ifdef SPARQ_HAS_CUDA
  if (device() != Device::kCPU) {
    cuda::copy_synchronously(params(), host, staging.size());
  }
#endif
}

const ParamEntry& ParamStore::entry(const std::string& name) const {
  auto it = index_.find(name);
  SPARQ_CHECK(it != index_.end(), "no parameter named '{}'", name);
  return entries_[it->second];
}

Tensor ParamStore::param(const std::string& name) const {
  check_buffers("a parameter view");
  const ParamEntry& e = entry(name);
  return Tensor(params() + e.offset, DType::kF32, e.spec.shape, device());
}

Tensor ParamStore::grad(const std::string& name) const {
  check_buffers("a gradient view");
  const ParamEntry& e = entry(name);
  return Tensor(grads() + e.offset, DType::kF32, e.spec.shape, device());
}

Tensor ParamStore::param_range(ParamRange range) const {
  check_buffers("a parameter range view");
  SPARQ_CHECK(range.offset >= 0 && range.end() <= flat_numel_,
              "param range [{}, {}) outside the layout of {} floats", range.offset, range.end(),
              flat_numel_);
  return Tensor(params() + range.offset, DType::kF32, Shape{range.count}, device());
}

Tensor ParamStore::grad_range(ParamRange range) const {
  check_buffers("a gradient range view");
  SPARQ_CHECK(range.offset >= 0 && range.end() <= flat_numel_,
              "grad range [{}, {}) outside the layout of {} floats", range.offset, range.end(),
              flat_numel_);
  return Tensor(grads() + range.offset, DType::kF32, Shape{range.count}, device());
}

ParamRange ParamStore::range_of(const std::vector<std::string>& names) const {
  SPARQ_CHECK(!names.empty(), "range_of() needs at least one parameter name");
  // A tensor of no elements covers nothing, so it does not widen the range. Its offset is the
  // next placed tensor's: {"w", "empty"} reached that tensor's start, and {"empty", "b"} with
  // "b" placed last reached over every tensor kept in place after "empty" (review, 2026-12-06).
  std::int64_t lo = INT64_MAX, hi = INT64_MIN, empty_at = INT64_MAX;
  for (const auto& n : names) {
    const ParamEntry& e = entry(n);
    if (e.numel == 0) {
      empty_at = std::min(empty_at, e.offset);
      continue;
    }
    lo = std::min(lo, e.offset);
    hi = std::max(hi, e.offset + e.numel);
  }
  if (lo > hi) return {empty_at, 0};  // only empty tensors: an empty range at the lowest
  return {lo, hi - lo};
}

std::vector<ParamRange> ParamStore::padding_in(ParamRange range) const {
  std::vector<ParamRange> covered;  // the tensors' parts inside `range`, then sorted
  for (const ParamEntry& e : entries_) {
    const std::int64_t lo = std::max(e.offset, range.offset);
    const std::int64_t hi = std::min(e.offset + e.numel, range.end());
    if (lo < hi) covered.push_back({lo, hi - lo});
  }
  std::sort(covered.begin(), covered.end(),
            [](const ParamRange& a, const ParamRange& b) { return a.offset < b.offset; });
  std::vector<ParamRange> gaps;
  std::int64_t at = range.offset;
  for (const ParamRange& c : covered) {
    if (c.offset > at) gaps.push_back({at, c.offset - at});
    at = std::max(at, c.end());
  }
  if (at < range.end()) gaps.push_back({at, range.end() - at});
  return gaps;
}

std::int64_t ParamStore::param_count() const {
  std::int64_t n = 0;
  for (const auto& e : entries_) n += e.numel;
  return n;
}

void ParamStore::zero_grads() {
  check_buffers("zero_grads()");
#ifdef SPARQ_HAS_CUDA
  if (context_->is_cuda()) {
    // Ordered on the compute stream after the optimizer step that read the gradients.
    CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.size(), context_->cuda().stream.get()));
    return;
  }
#endif
  grads_.zero();
}

std::string ParamStore::summary() const {
  std::size_t width = 4;
  for (const auto& e : entries_) width = std::max(width, e.spec.name.size());
  std::string out = fmt::format("{:<{}}  {:<18} {:>12} {:>12}  {:<16} {}\n", "name", width,
                                "shape", "numel", "offset", "init", "decay");
  for (const auto& e : entries_) {
    out += fmt::format("{:<{}}  {:<18} {:>12} {:>12}  {:<16} {}\n", e.spec.name, width,
                       e.spec.shape.str(), e.numel, e.offset, e.spec.init.str(),
                       e.spec.weight_decay ? "yes" : "no");
  }
  out += fmt::format("{} tensors, {} parameters, flat layout {} floats ({:.2f} MiB)",
                     entries_.size(), param_count(), flat_numel_,
                     static_cast<double>(flat_numel_) * 4.0 / (1 << 20));
  return out;
}

}  // namespace sparq
