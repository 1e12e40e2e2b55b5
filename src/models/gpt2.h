// GPT-2: token + learned position embeddings, n_layer pre-LN blocks
//   x = x + drop(attn(ln_1(x)))      causal multi-head self-attention, fused QKV
//   x = x + drop(mlp(ln_2(x)))       fc [C -> 4C], tanh-GELU, proj [4C -> C]
// then ln_f and an LM head tied to the token embedding. The table has padded_vocab() rows
// (vocab_size rounded up to vocab_pad); the padded logits are excluded from the softmax, so
// they are never predicted and their rows get no gradient from the head.
//
// Init (as GPT-2/nanoGPT): every weight N(0, init_std), the two residual output projections
// of each block N(0, init_std / sqrt(2 * n_layer)); biases zero; LayerNorm ones/zeros.
//
// Parameter names: wte.weight, wpe.weight, h.<l>.{ln_1, attn.qkv, attn.proj, ln_2, mlp.fc,
// mlp.proj}.{weight, bias}, ln_f.{weight, bias}.
// Layers (readiness units), forward order: wte, wpe, then per block h.<l>.ln_1, h.<l>.attn,
// h.<l>.ln_2, h.<l>.mlp.fc, h.<l>.mlp.proj, then ln_f. wte's gradient (embedding lookup +
// tied head) is complete only at the very end of backward, which is where it is reported.
//
// Batch: tokens and targets, i32 [B, T] with B <= micro_batch and T <= seq_len.
#pragma once

#include <memory>
#include <vector>

#include "layers/activation.h"
#include "layers/attention.h"
#include "layers/cross_entropy.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/residual.h"
#include "models/lm_head_slot.h"
#include "models/model.h"

namespace sparq {

class Gpt2 : public Model {
 public:
  Gpt2(const ModelConfig& config, RunShape shape);

  void declare(ParamStore& store) const override;
  float forward(const Batch& batch) override;
  Tensor logits() const override;
  std::size_t activation_bytes() const override;
  std::string tied_embedding() const override { return "wte.weight"; }

 private:
  struct Block {
    std::unique_ptr<LayerNorm> ln_1, ln_2;
    std::unique_ptr<MultiHeadAttention> attn;
    std::unique_ptr<Linear> fc, proj;
    std::unique_ptr<Dropout> attn_drop, mlp_drop;
    int x = -1, ln1 = -1, mid = -1, ln2 = -1, fc_out = -1, gelu_out = -1;  // arena slots
    int layer_ln_1 = -1, layer_attn = -1, layer_ln_2 = -1, layer_fc = -1, layer_proj = -1;
  };

  void bind_layers(const ParamStore& store) override;
  void backward_layers() override;
  const std::vector<std::int32_t>* head_predictions() const override;
  float head_forward(const Batch& batch);  // ln_f's output -> loss
  Tensor act(int slot, std::int64_t width) const;  // [b_, t_, width] view of a slot

  std::unique_ptr<Embedding> wte_, wpe_;
  std::unique_ptr<Dropout> emb_drop_;
  std::vector<Block> blocks_;
  std::unique_ptr<LayerNorm> ln_f_;
  std::unique_ptr<CrossEntropy> loss_;    // materialized head (fused_head=0, CUDA)
  std::unique_ptr<LmHeadSlot> head_slot_;  // its slot, and the fused head (fused_head=1, CPU)
  Gelu gelu_{GeluKind::kTanh, "gelu"};
  Residual residual_{"residual"};

  ActivationArena arena_;
  // The attention layers' backward scratch, one for all of them (Note [Workspace turns]).
  std::shared_ptr<SharedWorkspace> attention_workspace_ = std::make_shared<SharedWorkspace>();
  int x_out_ = -1, ln_f_out_ = -1;  // final residual stream, ln_f out
  // Gradient scratch: the residual stream's (forward borrows it for a branch's output), a
  // branch's, a second one (a layer's dx may not alias its dy), the MLP's wide one.
  int dres_ = -1, dbranch_ = -1, dbranch_alt_ = -1, dwide_ = -1;
  int layer_wte_ = -1, layer_wpe_ = -1, layer_ln_f_ = -1;

  Batch batch_;  // views of the last forward's inputs
  std::int64_t b_ = 0, t_ = 0;
};

}  // namespace sparq
