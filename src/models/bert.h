// BERT (pre-training model): embeddings = LayerNorm(word + position + token type), dropout;
// n_layer post-LN encoder layers
//   x = ln_1(x + drop(attn(x)))      bidirectional self-attention with a key-padding mask
//   x = ln_2(x + drop(mlp(x)))       fc [C -> ffn_dim], exact erf GELU, proj [ffn_dim -> C]
// an MLM head (dense, erf GELU, LayerNorm, decoder tied to the word embedding + a bias over
// the vocabulary) and, with `nsp`, a pooler (dense + tanh on the first token) and a
// next-sentence classifier [C -> 2]. Loss = MLM cross-entropy over the labelled positions
// (+ NSP cross-entropy). Init as BERT: weights N(0, init_std), biases zero, LayerNorm 1/0.
//
// Parameter names: embeddings.{word, position, token_type}.weight, embeddings.ln.*,
// layer.<l>.{attn.qkv, attn.proj, ln_1, mlp.fc, mlp.proj, ln_2}.*, mlm.{dense, ln}.*,
// mlm.decoder.bias, and with nsp pooler.* and nsp.*.
// Layers, forward order: embeddings.word, embeddings.position, embeddings.token_type,
// embeddings.ln, per layer (attn, ln_1, mlp.fc, mlp.proj, ln_2), mlm.dense, mlm.ln,
// mlm.decoder (the bias; the tied table is reported with embeddings.word, last), pooler, nsp.
//
// Batch: tokens, targets (MLM labels, kIgnoreIndex where nothing is predicted),
// attention_mask (optional; a row of padding alone gets a zero context, docs/layers.md),
// token_types (optional), nsp_labels (required with nsp).
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
#include "layers/tied_head_loss.h"
#include "layers/vocab_bias.h"
#include "models/lm_head_slot.h"
#include "models/model.h"

namespace sparq {

class Bert : public Model {
 public:
  Bert(const ModelConfig& config, RunShape shape);

  void declare(ParamStore& store) const override;
  float forward(const Batch& batch) override;
  Tensor logits() const override;  // MLM logits [B, T, padded_vocab]
  Tensor nsp_logits() const;       // [B, 2]; only with nsp, after a plain forward()
  std::size_t activation_bytes() const override;
  // The masked positions, whose number varies (Note [Token-weighted micro-batches],
  // train/data_parallel.h): the MLM term's gradient takes the target scale, NSP's does not.
  bool weighs_counted_targets() const override { return true; }

 private:
  struct Encoder {
    std::unique_ptr<MultiHeadAttention> attn;
    std::unique_ptr<LayerNorm> ln_1, ln_2;
    std::unique_ptr<Linear> fc, proj;
    std::unique_ptr<Dropout> attn_drop, mlp_drop;
    // Arena slots, kept for backward: the layer input, input + attention (ln_1's x),
    // ln_1 out, fc out, GELU out, ln_1 out + mlp (ln_2's x).
    int input = -1, attn_sum = -1, ln1 = -1, fc_out = -1, gelu_out = -1, mlp_sum = -1;
    int layer_attn = -1, layer_ln_1 = -1, layer_fc = -1, layer_proj = -1, layer_ln_2 = -1;
  };

  void bind_layers(const ParamStore& store) override;
  void backward_layers() override;
  Tensor act(int slot, std::int64_t width) const;
  void forward_nsp(const Tensor& hidden);
  Tensor nsp_logits_buffer() const;  // the NSP logits, or their gradient once taken
  const std::vector<std::int32_t>* head_predictions() const override;
  float head_forward(const Batch& batch);  // mlm.ln's output -> MLM loss
  TiedHeadLoss::Operands head_operands() const;
  void backward_nsp();

  std::unique_ptr<Embedding> word_, position_, token_type_;
  std::unique_ptr<LayerNorm> emb_ln_;
  std::unique_ptr<Dropout> emb_drop_;
  std::vector<Encoder> encoders_;
  std::unique_ptr<Linear> mlm_dense_;
  std::unique_ptr<LayerNorm> mlm_ln_;
  std::unique_ptr<VocabBias> mlm_bias_;
  std::unique_ptr<Linear> pooler_, nsp_;
  std::unique_ptr<CrossEntropy> mlm_loss_, nsp_loss_;  // mlm_loss_: materialized head
  std::unique_ptr<LmHeadSlot> head_slot_;  // its slot, and the fused head (fused_head=1, CPU)
  Gelu gelu_{GeluKind::kErf, "gelu"};
  Tanh tanh_{"pooler.tanh"};
  Residual residual_{"residual"};
  // The first tokens have two consumers, the MLM head and the pooler: backward joins both.
  Residual first_tokens_join_{"pooler.input"};

  ActivationArena arena_;
  // The attention layers' backward scratch, one for all of them (Note [Workspace turns]).
  std::shared_ptr<SharedWorkspace> attention_workspace_ = std::make_shared<SharedWorkspace>();
  int emb_sum_ = -1, x_out_ = -1;  // embedding sum, last encoder out
  int mlm_dense_out_ = -1, mlm_gelu_out_ = -1, mlm_ln_out_ = -1;
  // NSP: each sequence's first token (the pooler's input), pooler out, logits, gradients.
  int first_tokens_ = -1, pooled_ = -1, nsp_logits_ = -1, dfirst_tokens_ = -1, dpooled_ = -1;
  // Note [Eager head gradient] (model.h): the NSP loss has written its logits' gradient.
  bool nsp_gradient_taken_ = false;
  // Gradient scratch: the stream at encoder boundaries (forward borrows it for a branch's
  // output), the stream between an encoder's two sublayers, a branch's gradient, a second
  // one (attention's input gradient: a layer's dx may not alias its dy), the MLP's wide one.
  int dres_ = -1, dmid_ = -1, dbranch_ = -1, dbranch_alt_ = -1, dwide_ = -1;
  Buffer zero_types_;  // i32 zeros, the token types of a batch that gives none
  int layer_word_ = -1, layer_position_ = -1, layer_token_type_ = -1, layer_emb_ln_ = -1;
  int layer_mlm_dense_ = -1, layer_mlm_ln_ = -1, layer_mlm_bias_ = -1;
  int layer_pooler_ = -1, layer_nsp_ = -1;

  Batch batch_;
  Tensor types_;  // batch.token_types or a view of zero_types_
  std::int64_t b_ = 0, t_ = 0;
};

}  // namespace sparq
