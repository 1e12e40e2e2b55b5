// ParamStore: every trainable tensor of a model lives in ONE contiguous f32 parameter buffer,
// and its gradient in ONE gradient buffer with the identical layout. Each tensor starts on a
// 256-byte boundary (64 floats); the gaps are zero and stay zero (Note [Padding stays zero]).
// Optimizer state, error-feedback residuals and communication buckets are ranges (offset,
// count) of this same layout, so no gradient is ever copied into a fusion buffer.
//
// Note [Padding stays zero]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The alignment gaps between tensors are zero in the parameters, the gradients and the
// optimizer state. The GPU optimizer kernels run over whole spans, gaps included, so they
// keep them zero only if the gradient's gaps are; clipping measures the whole flat buffer.
// A bucket is a range of the layout, gaps included, and every compressor but the sign ones
// decodes a zero entry as zero; signsgd and onebit have no code for 0 and decode +scale
// there, so the exchange zeroes the gaps of such a bucket after decoding it
// (GradientExchange, padding_in()). Their error-feedback residual keeps its gaps' error, as
// on the structurally zero rows (docs/compress.md, "Error feedback").
//
// Usage: add() specs in forward order, then allocate(), then initialize(seed); after that
// the layout is frozen and views by name stay valid for the store's lifetime.
//
// allocate() may be given a `place_last` predicate: tensors it selects (for example biases and
// norms that are sent dense, uncompressed) are laid out after all the others, still in
// forward order among themselves. Both groups are then contiguous, so compressed and dense
// communication buckets are each plain ranges of the layout with no copies.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/init.h"
#include "core/tensor.h"

namespace sparq {

struct ParamSpec {
  std::string name;      // unique, e.g. "h.3.attn.qkv.weight"
  Shape shape;
  Init init;
  bool weight_decay = true;  // false for biases, norms and every embedding table
};

// A contiguous range of the flat layout, in elements (floats).
struct ParamRange {
  std::int64_t offset = 0;
  std::int64_t count = 0;
  std::int64_t end() const { return offset + count; }
  bool operator==(const ParamRange&) const = default;
};

// One layer's parameter tensors by name, in forward order: the unit in which backward reports
// gradients ready (Model::layers()) and from which the bucket plan is cut (comm::BucketPlan).
struct LayerParams {
  std::string name;                  // "h.3.attn"
  std::vector<std::string> tensors;  // "h.3.attn.qkv.weight", ...
};

struct ParamEntry {
  ParamSpec spec;
  std::int64_t offset = 0;  // in floats, multiple of kAlignFloats (set by allocate())
  std::int64_t numel = 0;
  ParamRange range() const { return {offset, numel}; }
};

class ParamStore {
 public:
  static constexpr std::int64_t kAlignBytes = 256;
  static constexpr std::int64_t kAlignFloats = kAlignBytes / 4;

  ParamStore() = default;
  ParamStore(ParamStore&&) = default;
  ParamStore& operator=(ParamStore&&) = default;

  // Registers a tensor; names must be unique. Only before allocate().
  void add(ParamSpec spec);
  // Freezes the layout and allocates zeroed parameter and gradient buffers on the context's
  // device, and binds the context: layers bound to this store run in it. The context must
  // outlive the store.
  using PlacementPredicate = std::function<bool(const ParamSpec&)>;
  void allocate(const ExecContext& context = ExecContext::cpu(),
                const PlacementPredicate& place_last = {});
  // The layout alone: offsets and sizes as allocate() sets them, and no buffers, for callers
  // that only plan (the simulator, comm.plan: auto). Building the buffers aborted the
  // simulator on a model larger than this host's memory, which it exists to price (review,
  // 2026-12-07: a 6.6B-parameter GPT-2). Views, initialize() and zero_grads() are then
  // refused; allocated() is true.
  void lay_out(const PlacementPredicate& place_last = {});
  bool layout_only() const { return layout_only_; }
  // Runs every spec's initialiser, seeded by (seed, hash of the name).
  void initialize(std::uint64_t seed);

  bool allocated() const { return allocated_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const ParamEntry& entry(const std::string& name) const;
  const std::vector<ParamEntry>& entries() const { return entries_; }  // forward order

  Tensor param(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  // Views of a range of the flat layout (1-D).
  Tensor param_range(ParamRange range) const;
  Tensor grad_range(ParamRange range) const;
  // The smallest range covering the named tensors (which need not be adjacent in order).
  // Tensors of no elements cover nothing; named alone, they give an empty range.
  ParamRange range_of(const std::vector<std::string>& names) const;
  // The alignment gaps inside `range` (Note [Padding stays zero]), ascending: the parts
  // no tensor covers.
  std::vector<ParamRange> padding_in(ParamRange range) const;

  // Offset where the tensors placed last begin (== flat_numel() when none were).
  std::int64_t place_last_offset() const { return place_last_offset_; }
  // Total floats including alignment padding: the length of every flat buffer.
  std::int64_t flat_numel() const { return flat_numel_; }
  // Sum of the tensors' element counts (the "parameter count" a user expects).
  std::int64_t param_count() const;
  float* params() const { return params_.as<float>(); }
  float* grads() const { return grads_.as<float>(); }
  Device device() const { return context_->device(); }
  const ExecContext& context() const { return *context_; }

  void zero_grads();
  // A table of name, shape, numel, offset, init, weight decay for the logs.
  std::string summary() const;

 private:
  std::vector<ParamEntry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
  std::int64_t flat_numel_ = 0;
  std::int64_t place_last_offset_ = 0;
  Buffer params_;
  Buffer grads_;
  const ExecContext* context_ = &ExecContext::cpu();
  bool allocated_ = false;
  bool layout_only_ = false;

  void freeze_layout(const PlacementPredicate& place_last);
  void check_buffers(const char* what) const;
};

}  // namespace sparq
