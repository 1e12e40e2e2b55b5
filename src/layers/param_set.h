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
//
// Note [Layer dispatch]
// ~~~~~~~~~~~~~~~~~~~~~
// A layer runs in one ExecContext (core/exec_context.h) and dispatches every call ONCE, on
// its context's device, to one of two implementations with the same math:
//   * cpu::<name>(...) in the layer's .cpp: the reference, always built;
//   * cuda::<name>(..., stream) declared in layers/cuda/<layer>_cuda.h (a header free of fmt
//     and of sparq's Status, which nvcc cannot compile) and defined in layers/cuda/<layer>.cu:
//     it only ENQUEUES on the context's compute stream (LayerBase::stream()), never syncs.
// Per-element math both sides do (dtype conversion, Philox draws, GELU) is one SPARQ_HOST_DEVICE
// function, so the CPU tests cover the device's arithmetic too. Every tensor of a call must
// live on the context's device: check_arg/check_rows take that device and name the argument
// that is elsewhere. Layers with parameters take the context from the store at bind(); the
// others get it from their model (bind_context()); both default to the CPU context. A layer
// without a CUDA implementation yet refuses device tensors with a message naming it (its
// checks still pass Device::kCPU).
#pragma once

#include <string>
#include <vector>

#include "core/exec_context.h"
#include "core/param_store.h"
#include "core/tensor.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sparq {

// The context a layer runs in (Note [Layer dispatch]).
class LayerBase {
 public:
  void bind_context(const ExecContext& context) { context_ = &context; }
  const ExecContext& context() const { return *context_; }
  Device device() const { return context_->device(); }
  bool on_cuda() const { return context_->is_cuda(); }
#if SPARQ_HAS_CUDA
  // The compute stream of a CUDA context; a fatal error on the CPU.
  cudaStream_t stream() const;
#endif

 private:
  const ExecContext* context_ = &ExecContext::cpu();
};

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

class ParamLayer : public LayerBase {
 public:
  explicit ParamLayer(std::string prefix) : params_(std::move(prefix)) {}

  void declare(ParamStore& store) const { params_.declare(store); }
  // Binds the views and runs in the store's context from now on.
  void bind(const ParamStore& store) {
    params_.bind(store);
    bind_context(store.context());
  }
  std::vector<std::string> param_names() const { return params_.names(); }
  const std::string& name() const { return params_.prefix(); }

 protected:
  ParamSet params_;
};

// Checks a view on `device` (the layer's context's, Note [Layer dispatch]) of `dtype` against
// the expected shape; the message names the layer and the argument, e.g. "h.0.ln_1: x has
// shape [4, 7], expected [4, 8]" or "h.0.ln_1: x is on cuda, this call runs on cpu".
void check_arg(const Tensor& t, const Shape& expected, const std::string& layer, const char* arg,
               DType dtype = DType::kF32, Device device = Device::kCPU);
// Same, for layers that accept any leading dimensions (f32 only): the last dim must equal
// `last` and the result is the number of rows (product of the leading dims).
std::int64_t check_rows(const Tensor& t, std::int64_t last, const std::string& layer,
                        const char* arg, Device device = Device::kCPU);

}  // namespace sparq
