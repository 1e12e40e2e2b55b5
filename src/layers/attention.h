// MultiHeadAttention: the self-attention block of GPT-2 and BERT,
//   qkv = x Wqkv^T + bqkv          [B, T, 3C]  (fused projection, GPT-2's c_attn layout)
//   ctx = attention(qkv)            [B, T, C]   (attention_kernels.h: masks, softmax, dropout)
//   y   = ctx Wproj^T + bproj       [B, T, C]
//
// Gradients: see Note [Gradient rule] (layers/param_set.h).
//
// Parameters, in forward order: "<prefix>.qkv.weight" [3C, C], "<prefix>.qkv.bias" [3C],
// "<prefix>.proj.weight" [C, C], "<prefix>.proj.bias" [C].
// Cache (owned, allocated once for max_batch x seq at construction, and again on the device
// by bind() to a CUDA store): qkv [B, T, 3C], the attention core's cache and ctx [B, T, C].
// Workspace, used within one call and never across calls (Note [Workspace turns],
// shared_workspace.h): dctx, dqkv, and the core's scratch (on the CPU per-thread areas for up
// to max_threads() at construction, on CUDA one [B, H, T, T] area). It is the layer's own
// unless share_workspace() gives it one that a model's attention layers share. The core's
// cache is, on the CPU, the flash kernel's log-sum-exp [B, H, T] (the probabilities are
// recomputed in tiles by backward, never stored), and on CUDA the probabilities
// [B, H, T, T]. The dropout mask is regenerated. backward reads the forward input x and the
// cache, and must get the same DropoutStep (and mask) as the forward.
// Dispatch: Note [Layer dispatch]; the attention core is cpu:: or cuda::attention_forward
// (attention_kernels.h), the projections are Linear layers bound to the same store.
#pragma once

#include <memory>
#include <vector>

#include "core/buffer.h"
#include "layers/attention_kernels.h"
#include "layers/linear.h"
#include "layers/shared_workspace.h"

namespace sparq {

class MultiHeadAttention : public LayerBase {
 public:
  struct Config {
    std::int64_t dim = 0;     // C
    std::int64_t heads = 0;   // H, divides C
    std::int64_t seq = 0;     // maximum T
    std::int64_t max_batch = 0;
    bool causal = false;
    float dropout = 0.0f;     // on the attention probabilities
    std::uint32_t layer_index = 0;  // dropout stream, unique among a model's dropout sites
    float init_std = 0.02f;
    float proj_init_std = 0.02f;  // GPT-2 scales the residual projection by 1/sqrt(2L)
  };
  MultiHeadAttention(std::string prefix, Config config);

  void declare(ParamStore& store) const;
  void bind(const ParamStore& store);
  std::vector<std::string> param_names() const;
  const std::string& name() const { return name_; }

  // x, y [B, T, C] with B <= max_batch, T <= seq. key_valid: empty, or u8 [B, T]. All on
  // the layer's device.
  void forward(const Tensor& x, const Tensor& y, const Tensor& key_valid,
               const DropoutStep& step);
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx, const DropoutStep& step);

  // Attention probabilities of the last forward, [B, H, T, T] (before dropout), for tests
  // and inspection. On the CPU they are rebuilt from the cache into an area allocated on the
  // first call (not counted in cache_bytes; training never calls this); on CUDA, a view of
  // the cache. The CPU rebuild reads the last forward's padding mask through its view, so
  // call it while the batch that forward saw is alive.
  Tensor probs() const;
  // Memory kept from forward to backward; the workspace (shared or not) is apart.
  std::size_t cache_bytes() const { return cache_.size(); }
  std::size_t workspace_bytes() const { return workspace_->bytes(); }
  // What the cache and one call's workspace take with the layer bound on `device` (memory
  // plans made before bind()).
  std::size_t cache_bytes_on(Device device) const;
  std::size_t workspace_request(Device device) const;
  // Uses `workspace` (sized for this layer at once, and again when bind() moves the layer to
  // a device) instead of its own: a model gives all its attention layers one.
  void share_workspace(std::shared_ptr<SharedWorkspace> workspace);

 private:
  AttentionGeom geom(const DropoutStep& step) const;
  void allocate_buffers();      // cache_ and the workspace on the layer's device
  float* core_scratch() const;  // the attention core's area, after dctx and dqkv
  float* core_cache() const;    // lse (CPU) or probs (CUDA), after qkv
  float* ctx() const;           // after the core's cache
  std::int64_t core_cache_floats(Device device) const;  // for max_batch x seq
  std::string name_;
  Config config_;
  Linear qkv_proj_, out_proj_;
  Buffer cache_;    // qkv | lse or probs | ctx
  mutable Buffer probs_;  // probs() on the CPU
  std::shared_ptr<SharedWorkspace> workspace_ =
      std::make_shared<SharedWorkspace>();  // dctx | dqkv | the core's scratch
  int slots_ = 1;
  std::int64_t batch_ = 0, t_ = 0;  // of the last forward
  Tensor key_valid_;
};

}  // namespace sparq
