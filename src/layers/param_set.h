// ParamSet: the trainable tensors of one layer, named "<prefix>.<local name>" in the
// ParamStore. A layer registers its specs here at construction, declares them into the
// store (in forward order) before ParamStore::allocate(), and binds to the store's views
// after it. The views point into the store's flat buffers, which own the memory; a bound
// layer must not outlive its store.
//
// ParamLayer is the small base every layer with parameters derives from, so models see one
// uniform surface: declare(), bind(), param_names(), name(). The WFBP scheduler never sees a
// layer: it gets the ranges the model recorded for each readiness unit at Model::bind().
//
// This header is also the layer contract: Note [Gradient rule] below is the one statement
// of what every backward in src/layers does, and each layer header cites it. It lives here
// rather than in a header of its own because this is the header every layer with
// parameters already includes (with check_arg/check_rows, the shared argument checks); a
// comment-only header would be an include that compiles to nothing.
//
// Note [Gradient rule]
// ~~~~~~~~~~~~~~~~~~~~
// Every layer's backward
//   * OVERWRITES its input gradient(s) (dx, ...): their old contents are never read, so the
//     caller may pass scratch that holds anything and need not zero it first;
//   * ACCUMULATES (+=) into its parameter gradients, the views of the ParamStore's gradient
//     buffer it was bound to; it never overwrites or zeroes them.
// Why: accumulating makes gradient accumulation free. Backward over k micro-batches without
// zeroing sums their parameter gradients, while every input gradient stays the fresh value
// of its own micro-batch; a parameter used at two sites (a tied embedding: the lookup and
// the output head) receives the sum of both contributions with no extra buffer. Zeroing is
// the owner's job, once per optimizer step (ParamStore's gradient buffer), never a layer's.
// Aliasing, unless the layer's header says otherwise:
//   * an input gradient must not alias any tensor the same backward call still reads (dy,
//     the forward input or output it is given, another input gradient): layers that allow
//     dx == dy (elementwise ones) say so in their header;
//   * parameter gradients never alias activations or input gradients: they live in the
//     store, activations in the model's arena.
// Layer-specific facts (which aliasing is allowed, fused forward/backward, lookups without
// an input gradient, an empty dx meaning "not needed") are stated in that layer's header.
#pragma once

#include <string>
#include <vector>

#include "core/param_store.h"
#include "core/tensor.h"

namespace sparq {

class ParamSet {
 public:
  ParamSet() = default;
  explicit ParamSet(std::string prefix) : prefix_(std::move(prefix)) {}

  // Registers "<prefix>.<name>" and returns its slot for param()/grad().
  int add(const std::string& name, Shape shape, Init init, bool weight_decay);
  void declare(ParamStore& store) const;
  // Fetches parameter and gradient views; the store must be allocated and hold every spec.
  void bind(const ParamStore& store);

  bool bound() const { return bound_; }
  const Tensor& param(int slot) const;
  const Tensor& grad(int slot) const;
  const std::string& prefix() const { return prefix_; }
  std::vector<std::string> names() const;
  int size() const { return static_cast<int>(specs_.size()); }

 private:
  std::string prefix_;
  std::vector<ParamSpec> specs_;
  std::vector<Tensor> params_;
  std::vector<Tensor> grads_;
  bool bound_ = false;
};

class ParamLayer {
 public:
  explicit ParamLayer(std::string prefix) : params_(std::move(prefix)) {}

  void declare(ParamStore& store) const { params_.declare(store); }
  void bind(const ParamStore& store) { params_.bind(store); }
  std::vector<std::string> param_names() const { return params_.names(); }
  const std::string& name() const { return params_.prefix(); }

 protected:
  ParamSet params_;
};

// Checks a host f32 (or other dtype) view against the expected shape; the message names
// the layer and the argument, e.g. "h.0.ln_1: x has shape [4, 7], expected [4, 8]".
void check_arg(const Tensor& t, const Shape& expected, const std::string& layer, const char* arg,
               DType dtype = DType::kF32);
// Same, for layers that accept any leading dimensions: the last dim must equal `last` and
// the result is the number of rows (product of the leading dims).
std::int64_t check_rows(const Tensor& t, std::int64_t last, const std::string& layer,
                        const char* arg);

}  // namespace sparq
