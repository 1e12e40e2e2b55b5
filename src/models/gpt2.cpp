#include "models/gpt2.h"

#include <cmath>

#include "core/check.h"

namespace sparq {

Gpt2::Gpt2(const ModelConfig& c, RunShape shape) : Model(c, shape) {
  const std::int64_t rows = shape.micro_batch * shape.seq_len, dim = c.n_embd;
  const float proj_std = c.init_std / std::sqrt(2.0f * static_cast<float>(c.n_layer));

  wte_ = std::make_unique<Embedding>(
      "wte", Embedding::Config{c.padded_vocab(), dim, c.init_std, c.vocab_size});
  wpe_ = std::make_unique<Embedding>("wpe", Embedding::Config{c.n_ctx, dim, c.init_std});
  emb_drop_ = std::make_unique<Dropout>("drop", c.dropout, 0);
  layer_wte_ = add_layer("wte", wte_->param_names());
  layer_wpe_ = add_layer("wpe", wpe_->param_names());

  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l);
    const auto site = static_cast<std::uint32_t>(1 + 3 * l);  // unique dropout streams
    Block blk;
    blk.ln_1 = std::make_unique<LayerNorm>(p + ".ln_1", LayerNorm::Config{dim, c.ln_eps, rows});
    MultiHeadAttention::Config ac;
    ac.dim = dim, ac.heads = c.n_head, ac.seq = shape.seq_len, ac.max_batch = shape.micro_batch;
    ac.causal = true, ac.dropout = c.attn_dropout, ac.layer_index = site;
    ac.init_std = c.init_std, ac.proj_init_std = proj_std;
    blk.attn = std::make_unique<MultiHeadAttention>(p + ".attn", ac);
    blk.attn->share_workspace(attention_workspace_);  // Note [Workspace turns]
    blk.attn_drop = std::make_unique<Dropout>(p + ".attn.drop", c.dropout, site + 1);
    blk.ln_2 = std::make_unique<LayerNorm>(p + ".ln_2", LayerNorm::Config{dim, c.ln_eps, rows});
    blk.fc = std::make_unique<Linear>(p + ".mlp.fc", Linear::Config{dim, c.ffn_dim, true, c.init_std});
    blk.proj = std::make_unique<Linear>(p + ".mlp.proj", Linear::Config{c.ffn_dim, dim, true, proj_std});
    blk.mlp_drop = std::make_unique<Dropout>(p + ".mlp.drop", c.dropout, site + 2);

    blk.layer_ln_1 = add_layer(blk.ln_1->name(), blk.ln_1->param_names());
    blk.layer_attn = add_layer(blk.attn->name(), blk.attn->param_names());
    blk.layer_ln_2 = add_layer(blk.ln_2->name(), blk.ln_2->param_names());
    blk.layer_fc = add_layer(blk.fc->name(), blk.fc->param_names());
    blk.layer_proj = add_layer(blk.proj->name(), blk.proj->param_names());

    // Kept for backward: block input (ln_1's x), ln_1 out (attention's x), the stream after
    // attention (ln_2's x), ln_2 out (fc's x), fc out (GELU's x), GELU out (proj's x).
    blk.x = arena_.reserve(rows * dim);
    blk.ln1 = arena_.reserve(rows * dim);
    blk.mid = arena_.reserve(rows * dim);
    blk.ln2 = arena_.reserve(rows * dim);
    blk.fc_out = arena_.reserve(rows * c.ffn_dim);
    blk.gelu_out = arena_.reserve(rows * c.ffn_dim);
    blocks_.push_back(std::move(blk));
  }
  ln_f_ = std::make_unique<LayerNorm>("ln_f", LayerNorm::Config{dim, c.ln_eps, rows});
  layer_ln_f_ = add_layer("ln_f", ln_f_->param_names());
  loss_ = std::make_unique<CrossEntropy>(
      "loss", CrossEntropy::Config{c.padded_vocab(), c.vocab_size, kIgnoreIndex, rows});

  x_out_ = arena_.reserve(rows * dim);
  ln_f_out_ = arena_.reserve(rows * dim);
  // The head's slot is reserved by bind_layers, once the store's device is known (Note
  // [Head slot], lm_head_slot.h).
  head_slot_ = std::make_unique<LmHeadSlot>(
      "head", c.fused_head,
      TiedHeadLoss::Config{c.padded_vocab(), c.vocab_size, dim, kIgnoreIndex, rows});
  dres_ = arena_.reserve(rows * dim);
  dbranch_ = arena_.reserve(rows * dim);
  dbranch_alt_ = arena_.reserve(rows * dim);
  dwide_ = arena_.reserve(rows * c.ffn_dim);
}

void Gpt2::declare(ParamStore& store) const {
  wte_->declare(store);
  wpe_->declare(store);
  for (const Block& blk : blocks_) {
    blk.ln_1->declare(store);
    blk.attn->declare(store);
    blk.ln_2->declare(store);
    blk.fc->declare(store);
    blk.proj->declare(store);
  }
  ln_f_->declare(store);
}

void Gpt2::bind_layers(const ParamStore& store) {
  const ExecContext& ctx = store.context();
  fused_head_ = head_slot_->bind(arena_, ctx);
  if (!shape_.plan_only) arena_.allocate(ctx.device());  // RunShape::plan_only
  for (LayerBase* layer :
       {static_cast<LayerBase*>(emb_drop_.get()), static_cast<LayerBase*>(loss_.get()),
        static_cast<LayerBase*>(&gelu_), static_cast<LayerBase*>(&residual_)}) {
    layer->bind_context(ctx);
  }
  for (Block& blk : blocks_) {
    blk.attn_drop->bind_context(ctx);
    blk.mlp_drop->bind_context(ctx);
  }
  wte_->bind(store);
  wpe_->bind(store);
  for (Block& blk : blocks_) {
    blk.ln_1->bind(store);
    blk.attn->bind(store);
    blk.ln_2->bind(store);
    blk.fc->bind(store);
    blk.proj->bind(store);
  }
  ln_f_->bind(store);
}

Tensor Gpt2::act(int slot, std::int64_t width) const { return arena_.view(slot, {b_, t_, width}); }

Tensor Gpt2::logits() const {
  check_logits_readable(b_);
  return act(head_slot_->logits(), config_.padded_vocab());
}

const std::vector<std::int32_t>* Gpt2::head_predictions() const {
  return fused_head_ ? &head_slot_->fused_head()->predictions() : nullptr;
}

float Gpt2::head_forward(const Batch& batch) {
  const Tensor x = act(ln_f_out_, config_.n_embd);
  if (!fused_head_) {
    loss_gradient_taken_ = false;
    const Tensor z = logits();
    wte_->project(x, z);
    if (!backward_follows()) return loss_->forward(z, batch.targets);
    // Note [Eager head gradient]: the logits' buffer receives their gradient now.
    loss_gradient_taken_ = true;
    return loss_->forward_backward(z, batch.targets, z);
  }
  const TiedHeadLoss::Operands head{wte_->table(), wte_->table_grad(), {}, {}};
  if (!backward_follows()) return head_slot_->fused_head()->forward(x, head, batch.targets);
  mark_head_gradient_added();  // Note [Eager head gradient], model.h
  return head_slot_->fused_head()->forward_backward(x, head, batch.targets,
                                                    act(head_slot_->dhead(), config_.n_embd));
}

float Gpt2::forward(const Batch& batch) {
  check_token_batch(batch, &b_, &t_);
  batch_ = batch;
  const std::int64_t dim = config_.n_embd, wide = config_.ffn_dim;

  const Tensor x0 = act(blocks_.front().x, dim);
  wte_->forward(batch.tokens, x0);
  wpe_->forward_positions(x0, /*accumulate=*/true);
  emb_drop_->forward(x0, x0, step_);

  const Tensor branch = act(dres_, dim);  // a branch's output before it joins the stream
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    Block& blk = blocks_[l];
    const Tensor x = act(blk.x, dim), ln1 = act(blk.ln1, dim), mid = act(blk.mid, dim);
    const Tensor ln2 = act(blk.ln2, dim), fc = act(blk.fc_out, wide), gelu = act(blk.gelu_out, wide);
    const Tensor next = act(l + 1 < blocks_.size() ? blocks_[l + 1].x : x_out_, dim);
    blk.ln_1->forward(x, ln1);
    blk.attn->forward(ln1, branch, Tensor(), step_);
    blk.attn_drop->forward(branch, branch, step_);
    residual_.forward(x, branch, mid);
    blk.ln_2->forward(mid, ln2);
    blk.fc->forward(ln2, fc);
    gelu_.forward(fc, gelu);
    blk.proj->forward(gelu, branch);
    blk.mlp_drop->forward(branch, branch, step_);
    residual_.forward(mid, branch, next);
  }
  ln_f_->forward(act(x_out_, dim), act(ln_f_out_, dim));
  const float loss = head_forward(batch);
  mark_forward();
  return loss;
}

void Gpt2::backward_layers() {
  const std::int64_t dim = config_.n_embd, wide = config_.ffn_dim;
  const Tensor dres = act(dres_, dim), dbranch = act(dbranch_, dim);
  const Tensor dbranch_alt = act(dbranch_alt_, dim), dwide = act(dwide_, wide);

  // The head leaves ln_f's output gradient in dhead (fused: computed by the training forward,
  // Note [Eager head gradient]) or dbranch, and the final stream's gradient goes to dres.
  Tensor dhead = dbranch;
  if (fused_head_) {
    dhead = act(head_slot_->dhead(), dim);
    if (!head_gradient_added_) {  // a plain forward(): the head's gradient is due now
      const TiedHeadLoss::Operands head{wte_->table(), wte_->table_grad(), {}, {}};
      head_slot_->fused_head()->forward_backward(act(ln_f_out_, dim), head, batch_.targets, dhead);
    }
  } else {
    // The logits' buffer receives their gradient (already, after forward_for_backward()).
    const Tensor z = act(head_slot_->logits(), config_.padded_vocab());
    if (!loss_gradient_taken_) loss_->forward_backward(z, batch_.targets, z);
    wte_->project_backward(act(ln_f_out_, dim), z, dbranch);  // tied: adds into dwte
  }
  if (tied_split_) report_early(layer_wte_);  // Note [Tied embedding split], model.h
  ln_f_->backward(act(x_out_, dim), dhead, dres);
  ready(layer_ln_f_);

  // dres carries the gradient of the residual stream. A residual add hands it unchanged to
  // its branch, whose backward reads it in place; where the branch forked off the stream,
  // residual_.backward joins the branch's input gradient into it (dres = dres + dbranch).
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    Block& blk = *it;
    const Tensor x = act(blk.x, dim), ln1 = act(blk.ln1, dim), mid = act(blk.mid, dim);
    const Tensor ln2 = act(blk.ln2, dim), fc = act(blk.fc_out, wide), gelu = act(blk.gelu_out, wide);

    blk.proj->backward(gelu, dropout_grad(*blk.mlp_drop, dres, dbranch), dwide);
    ready(blk.layer_proj);
    gelu_.backward(fc, dwide, dwide);
    blk.fc->backward(ln2, dwide, dbranch);
    ready(blk.layer_fc);
    blk.ln_2->backward(mid, dbranch, dbranch_alt);
    ready(blk.layer_ln_2);
    residual_.backward(dres, dbranch_alt, dres);

    blk.attn->backward(ln1, dropout_grad(*blk.attn_drop, dres, dbranch), dbranch_alt, step_);
    ready(blk.layer_attn);
    blk.ln_1->backward(x, dbranch_alt, dbranch);
    ready(blk.layer_ln_1);
    residual_.backward(dres, dbranch, dres);
  }
  emb_drop_->backward(dres, dres, step_);
  wpe_->backward_positions(dres);
  ready(layer_wpe_);
  // On the CPU the lookup's gradient is summed per row, then added to the table once per
  // row, split or not, so that both give the same bits at one rank (Note [Tied embedding
  // split], model.h). CUDA keeps the plain scatter-add (it never splits), so the two devices'
  // table gradients differ by rounding here; the CUDA tests compare with tolerances.
  if (tied_split_) {
    wte_->backward_rows(batch_.tokens, dres, &tied_lookup_grad_);
  } else if (store().device() == Device::kCPU) {
    wte_->backward_by_rows(batch_.tokens, dres, &tied_lookup_grad_);
  } else {
    wte_->backward(batch_.tokens, dres);
  }
  ready(layer_wte_);
}

// For activation_device(), whether bound there or not: the attention caches and their one
// workspace, and the head's slot, depend on the device (the arena's other slots do not).
std::size_t Gpt2::activation_bytes() const {
  const Device device = activation_device();
  const std::int64_t rows = shape_.micro_batch * shape_.seq_len;
  std::size_t bytes = head_slot_->bytes_on(arena_, device) + ln_f_->cache_bytes();
  for (const Block& blk : blocks_) {
    bytes += blk.ln_1->cache_bytes() + blk.ln_2->cache_bytes() + blk.attn->cache_bytes_on(device);
  }
  bytes += blocks_.empty() ? 0 : blocks_.front().attn->workspace_request(device);
  // CrossEntropy keeps one float per row.
  return bytes + static_cast<std::size_t>(rows) * sizeof(float);
}

}  // namespace sparq
