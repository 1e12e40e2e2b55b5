#include "models/bert.h"

#include "core/check.h"
#include "core/tensor_copy.h"

namespace sparq {
namespace {

// Row (b, 0) of a [B, T, C] activation, as [1, C]: sequence b's first token, which the
// pooler reads.
Tensor first_token(const Tensor& x, std::int64_t b) {
  return x.slice_rows(b, b + 1).reshape({x.dim(1), x.dim(2)}).slice_rows(0, 1);
}

}  // namespace

Bert::Bert(const ModelConfig& c, RunShape shape) : Model(c, shape) {
  const std::int64_t batch = shape.micro_batch, rows = batch * shape.seq_len, dim = c.n_embd;
  const std::int64_t vocab = c.padded_vocab();

  word_ = std::make_unique<Embedding>("embeddings.word",
                                      Embedding::Config{vocab, dim, c.init_std, c.vocab_size});
  position_ = std::make_unique<Embedding>("embeddings.position",
                                          Embedding::Config{c.n_ctx, dim, c.init_std});
  token_type_ = std::make_unique<Embedding>("embeddings.token_type",
                                            Embedding::Config{c.type_vocab_size, dim, c.init_std});
  emb_ln_ = std::make_unique<LayerNorm>("embeddings.ln", LayerNorm::Config{dim, c.ln_eps, rows});
  emb_drop_ = std::make_unique<Dropout>("embeddings.drop", c.dropout, 0);
  layer_word_ = add_layer(word_->name(), word_->param_names());
  layer_position_ = add_layer(position_->name(), position_->param_names());
  layer_token_type_ = add_layer(token_type_->name(), token_type_->param_names());
  layer_emb_ln_ = add_layer(emb_ln_->name(), emb_ln_->param_names());
  emb_sum_ = arena_.reserve(rows * dim);

  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "layer." + std::to_string(l);
    const auto site = static_cast<std::uint32_t>(1 + 3 * l);
    Encoder e;
    MultiHeadAttention::Config ac;
    ac.dim = dim, ac.heads = c.n_head, ac.seq = shape.seq_len, ac.max_batch = batch;
    ac.causal = false, ac.dropout = c.attn_dropout, ac.layer_index = site;
    ac.init_std = c.init_std, ac.proj_init_std = c.init_std;
    e.attn = std::make_unique<MultiHeadAttention>(p + ".attn", ac);
    e.attn->share_workspace(attention_workspace_);  // Note [Workspace turns]
    e.attn_drop = std::make_unique<Dropout>(p + ".attn.drop", c.dropout, site + 1);
    e.ln_1 = std::make_unique<LayerNorm>(p + ".ln_1", LayerNorm::Config{dim, c.ln_eps, rows});
    e.fc = std::make_unique<Linear>(p + ".mlp.fc", Linear::Config{dim, c.ffn_dim, true, c.init_std});
    e.proj = std::make_unique<Linear>(p + ".mlp.proj", Linear::Config{c.ffn_dim, dim, true, c.init_std});
    e.mlp_drop = std::make_unique<Dropout>(p + ".mlp.drop", c.dropout, site + 2);
    e.ln_2 = std::make_unique<LayerNorm>(p + ".ln_2", LayerNorm::Config{dim, c.ln_eps, rows});
    e.layer_attn = add_layer(e.attn->name(), e.attn->param_names());
    e.layer_ln_1 = add_layer(e.ln_1->name(), e.ln_1->param_names());
    e.layer_fc = add_layer(e.fc->name(), e.fc->param_names());
    e.layer_proj = add_layer(e.proj->name(), e.proj->param_names());
    e.layer_ln_2 = add_layer(e.ln_2->name(), e.ln_2->param_names());
    // Kept for backward: layer input (attention's x), input + attn (ln_1's x), ln_1 out
    // (fc's x), fc out (GELU's x), GELU out (proj's x), ln_1 out + mlp (ln_2's x).
    e.input = arena_.reserve(rows * dim);
    e.attn_sum = arena_.reserve(rows * dim);
    e.ln1 = arena_.reserve(rows * dim);
    e.fc_out = arena_.reserve(rows * c.ffn_dim);
    e.gelu_out = arena_.reserve(rows * c.ffn_dim);
    e.mlp_sum = arena_.reserve(rows * dim);
    encoders_.push_back(std::move(e));
  }
  x_out_ = arena_.reserve(rows * dim);

  mlm_dense_ = std::make_unique<Linear>("mlm.dense", Linear::Config{dim, dim, true, c.init_std});
  mlm_ln_ = std::make_unique<LayerNorm>("mlm.ln", LayerNorm::Config{dim, c.ln_eps, rows});
  mlm_bias_ = std::make_unique<VocabBias>("mlm.decoder", vocab);
  layer_mlm_dense_ = add_layer(mlm_dense_->name(), mlm_dense_->param_names());
  layer_mlm_ln_ = add_layer(mlm_ln_->name(), mlm_ln_->param_names());
  layer_mlm_bias_ = add_layer(mlm_bias_->name(), mlm_bias_->param_names());
  mlm_loss_ = std::make_unique<CrossEntropy>(
      "mlm.loss", CrossEntropy::Config{vocab, c.vocab_size, kIgnoreIndex, rows});
  mlm_dense_out_ = arena_.reserve(rows * dim);
  mlm_gelu_out_ = arena_.reserve(rows * dim);
  mlm_ln_out_ = arena_.reserve(rows * dim);
  // The head's slot is reserved by bind_layers, once the store's device is known (Note
  // [Head slot], lm_head_slot.h).
  head_slot_ = std::make_unique<LmHeadSlot>(
      "mlm.head", c.fused_head, TiedHeadLoss::Config{vocab, c.vocab_size, dim, kIgnoreIndex, rows});

  if (c.nsp) {
    pooler_ = std::make_unique<Linear>("pooler", Linear::Config{dim, dim, true, c.init_std});
    nsp_ = std::make_unique<Linear>("nsp", Linear::Config{dim, 2, true, c.init_std});
    layer_pooler_ = add_layer(pooler_->name(), pooler_->param_names());
    layer_nsp_ = add_layer(nsp_->name(), nsp_->param_names());
    nsp_loss_ = std::make_unique<CrossEntropy>(
        "nsp.loss", CrossEntropy::Config{2, 2, kIgnoreIndex, batch});
    first_tokens_ = arena_.reserve(batch * dim);
    pooled_ = arena_.reserve(batch * dim);
    nsp_logits_ = arena_.reserve(batch * 2);
    dfirst_tokens_ = arena_.reserve(batch * dim);
    dpooled_ = arena_.reserve(batch * dim);
  }
  dres_ = arena_.reserve(rows * dim);
  dmid_ = arena_.reserve(rows * dim);
  dbranch_ = arena_.reserve(rows * dim);
  dbranch_alt_ = arena_.reserve(rows * dim);
  dwide_ = arena_.reserve(rows * c.ffn_dim);
}

void Bert::declare(ParamStore& store) const {
  word_->declare(store);
  position_->declare(store);
  token_type_->declare(store);
  emb_ln_->declare(store);
  for (const Encoder& e : encoders_) {
    e.attn->declare(store);
    e.ln_1->declare(store);
    e.fc->declare(store);
    e.proj->declare(store);
    e.ln_2->declare(store);
  }
  mlm_dense_->declare(store);
  mlm_ln_->declare(store);
  mlm_bias_->declare(store);
  if (config_.nsp) {
    pooler_->declare(store);
    nsp_->declare(store);
  }
}

void Bert::bind_layers(const ParamStore& store) {
  const ExecContext& ctx = store.context();
  fused_head_ = head_slot_->bind(arena_, ctx);
  if (!shape_.plan_only) arena_.allocate(ctx.device());  // RunShape::plan_only
  const auto type_bytes = static_cast<std::size_t>(shape_.micro_batch * shape_.seq_len) *
                          sizeof(std::int32_t);
  zero_types_ = ctx.is_cuda() ? Buffer::device(type_bytes, /*zeroed=*/true)
                              : Buffer::host(type_bytes, /*zeroed=*/true);
  for (LayerBase* layer :
       {static_cast<LayerBase*>(emb_drop_.get()), static_cast<LayerBase*>(mlm_loss_.get()),
        static_cast<LayerBase*>(&gelu_), static_cast<LayerBase*>(&tanh_),
        static_cast<LayerBase*>(&residual_), static_cast<LayerBase*>(&first_tokens_join_)}) {
    layer->bind_context(ctx);
  }
  if (nsp_loss_) nsp_loss_->bind_context(ctx);
  for (Encoder& e : encoders_) {
    e.attn_drop->bind_context(ctx);
    e.mlp_drop->bind_context(ctx);
  }
  word_->bind(store);
  position_->bind(store);
  token_type_->bind(store);
  emb_ln_->bind(store);
  for (Encoder& e : encoders_) {
    e.attn->bind(store);
    e.ln_1->bind(store);
    e.fc->bind(store);
    e.proj->bind(store);
    e.ln_2->bind(store);
  }
  mlm_dense_->bind(store);
  mlm_ln_->bind(store);
  mlm_bias_->bind(store);
  if (config_.nsp) {
    pooler_->bind(store);
    nsp_->bind(store);
  }
}

Tensor Bert::act(int slot, std::int64_t width) const { return arena_.view(slot, {b_, t_, width}); }

Tensor Bert::logits() const {
  check_logits_readable(b_);
  return act(head_slot_->logits(), config_.padded_vocab());
}

const std::vector<std::int32_t>* Bert::head_predictions() const {
  return fused_head_ ? &head_slot_->fused_head()->predictions() : nullptr;
}

TiedHeadLoss::Operands Bert::head_operands() const {
  return {word_->table(), word_->table_grad(), mlm_bias_->bias(), mlm_bias_->bias_grad()};
}

float Bert::head_forward(const Batch& batch) {
  const Tensor x = act(mlm_ln_out_, config_.n_embd);
  if (!fused_head_) {
    loss_gradient_taken_ = false;
    const Tensor z = logits();
    word_->project(x, z);
    mlm_bias_->forward(z);
    if (!backward_follows()) return mlm_loss_->forward(z, batch.targets);
    // Note [Eager head gradient]: the logits' buffer receives their gradient now, seeded
    // with the target scale (Note [Token-weighted micro-batches]) as in backward below.
    loss_gradient_taken_ = true;
    return mlm_loss_->forward_backward(z, batch.targets, z, target_grad_scale_);
  }
  if (!backward_follows())
    return head_slot_->fused_head()->forward(x, head_operands(), batch.targets);
  mark_head_gradient_added();  // Note [Eager head gradient], model.h
  // Note [Token-weighted micro-batches] (train/data_parallel.h): the scale seeds the MLM
  // gradient here and below, on every head and device (the CUDA cross-entropy takes it too).
  return head_slot_->fused_head()->forward_backward(x, head_operands(), batch.targets,
                                                    act(head_slot_->dhead(), config_.n_embd),
                                                    target_grad_scale_);
}

Tensor Bert::nsp_logits() const {
  SPARQ_CHECK(config_.nsp && b_ > 0, "{}: nsp_logits() needs nsp=1 and a forward()", config_.spec);
  SPARQ_CHECK(!nsp_gradient_taken_,
              "{}: after forward_for_backward() the NSP logits buffer "
              "holds their gradient (Note [Eager head gradient]); read them after a plain "
              "forward()",
              config_.spec);
  return nsp_logits_buffer();
}

Tensor Bert::nsp_logits_buffer() const { return arena_.view(nsp_logits_, {b_, 2}); }

float Bert::forward(const Batch& batch) {
  check_token_batch(batch, &b_, &t_);
  if (!batch.attention_mask.empty()) {
    check_batch_tensor(config_.spec, "attention_mask", batch.attention_mask, DType::kU8, {b_, t_});
  }
  types_ = Tensor(zero_types_.data(), DType::kI32, {b_, t_}, zero_types_.device());
  if (!batch.token_types.empty()) {
    check_batch_tensor(config_.spec, "token_types", batch.token_types, DType::kI32, {b_, t_});
    types_ = batch.token_types;
  }
  if (config_.nsp) check_batch_tensor(config_.spec, "nsp_labels", batch.nsp_labels, DType::kI32, {b_});
  batch_ = batch;
  const std::int64_t dim = config_.n_embd, wide = config_.ffn_dim;

  const Tensor emb = act(emb_sum_, dim), x0 = act(encoders_.front().input, dim);
  word_->forward(batch.tokens, emb);
  position_->forward_positions(emb, /*accumulate=*/true);
  token_type_->forward(types_, emb, /*accumulate=*/true);
  emb_ln_->forward(emb, x0);
  emb_drop_->forward(x0, x0, step_);

  const Tensor branch = act(dres_, dim);  // a branch's output; backward reuses the slot
  for (std::size_t l = 0; l < encoders_.size(); ++l) {
    Encoder& e = encoders_[l];
    const Tensor input = act(e.input, dim), attn_sum = act(e.attn_sum, dim);
    const Tensor ln1 = act(e.ln1, dim), mlp_sum = act(e.mlp_sum, dim);
    const Tensor fc = act(e.fc_out, wide), gelu = act(e.gelu_out, wide);
    const Tensor next = act(l + 1 < encoders_.size() ? encoders_[l + 1].input : x_out_, dim);
    e.attn->forward(input, branch, batch.attention_mask, step_);
    e.attn_drop->forward(branch, branch, step_);
    residual_.forward(input, branch, attn_sum);
    e.ln_1->forward(attn_sum, ln1);
    e.fc->forward(ln1, fc);
    gelu_.forward(fc, gelu);
    e.proj->forward(gelu, branch);
    e.mlp_drop->forward(branch, branch, step_);
    residual_.forward(ln1, branch, mlp_sum);
    e.ln_2->forward(mlp_sum, next);
  }

  const Tensor hidden = act(x_out_, dim);
  mlm_dense_->forward(hidden, act(mlm_dense_out_, dim));
  gelu_.forward(act(mlm_dense_out_, dim), act(mlm_gelu_out_, dim));
  mlm_ln_->forward(act(mlm_gelu_out_, dim), act(mlm_ln_out_, dim));
  float loss = head_forward(batch);
  unscored_loss_ = 0;
  nsp_gradient_taken_ = false;
  if (config_.nsp) {
    forward_nsp(hidden);
    // Trained on, but not over the MLM targets that score() counts (evaluation leaves it out).
    // A training forward takes the NSP logits' gradient too (Note [Eager head gradient]).
    const Tensor z = nsp_logits_buffer();
    nsp_gradient_taken_ = backward_follows();
    unscored_loss_ = nsp_gradient_taken_ ? nsp_loss_->forward_backward(z, batch.nsp_labels, z)
                                         : nsp_loss_->forward(z, batch.nsp_labels);
    loss += unscored_loss_;
  }
  mark_forward();
  return loss;
}

void Bert::forward_nsp(const Tensor& hidden) {
  const std::int64_t dim = config_.n_embd;
  const Tensor first = arena_.view(first_tokens_, {b_, dim});
  const Tensor pooled = arena_.view(pooled_, {b_, dim});
  for (std::int64_t b = 0; b < b_; ++b) {
    copy_tensor(first_token(hidden, b), first.slice_rows(b, b + 1), store().context());
  }
  pooler_->forward(first, pooled);
  tanh_.forward(pooled, pooled);
  nsp_->forward(pooled, nsp_logits_buffer());
}

void Bert::backward_nsp() {
  const std::int64_t dim = config_.n_embd;
  const Tensor pooled = arena_.view(pooled_, {b_, dim}), dpooled = arena_.view(dpooled_, {b_, dim});
  const Tensor z = nsp_logits_buffer();  // their gradient, once the loss has run
  if (!nsp_gradient_taken_) nsp_loss_->forward_backward(z, batch_.nsp_labels, z);
  nsp_gradient_taken_ = false;
  nsp_->backward(pooled, z, dpooled);
  ready(layer_nsp_);
  tanh_.backward(pooled, dpooled, dpooled);
  pooler_->backward(arena_.view(first_tokens_, {b_, dim}), dpooled,
                    arena_.view(dfirst_tokens_, {b_, dim}));
  ready(layer_pooler_);
}

void Bert::backward_layers() {
  const std::int64_t dim = config_.n_embd, wide = config_.ffn_dim;
  const Tensor dres = act(dres_, dim), dmid = act(dmid_, dim);
  const Tensor dbranch = act(dbranch_, dim), dbranch_alt = act(dbranch_alt_, dim);
  const Tensor dwide = act(dwide_, wide);

  if (config_.nsp) backward_nsp();  // declared last, so reported first
  // The head leaves mlm.ln's output gradient in dhead (fused: computed by the training
  // forward, Note [Eager head gradient], model.h) or dmid.
  Tensor dhead = dmid;
  if (fused_head_) {
    dhead = act(head_slot_->dhead(), dim);
    if (!head_gradient_added_) {  // a plain forward(): the head's gradient is due now
      head_slot_->fused_head()->forward_backward(act(mlm_ln_out_, dim), head_operands(),
                                                 batch_.targets, dhead, target_grad_scale_);
    }
  } else {
    const Tensor z = act(head_slot_->logits(), config_.padded_vocab());
    if (!loss_gradient_taken_)
      mlm_loss_->forward_backward(z, batch_.targets, z, target_grad_scale_);
    mlm_bias_->backward(z);
    word_->project_backward(act(mlm_ln_out_, dim), z, dmid);  // tied: adds into dword
  }
  ready(layer_mlm_bias_);
  mlm_ln_->backward(act(mlm_gelu_out_, dim), dhead, dbranch);
  ready(layer_mlm_ln_);
  gelu_.backward(act(mlm_dense_out_, dim), dbranch, dbranch);
  mlm_dense_->backward(act(x_out_, dim), dbranch, dres);
  ready(layer_mlm_dense_);
  if (config_.nsp) {  // the first tokens fed the MLM head and the pooler: join both paths
    const Tensor dfirst_tokens = arena_.view(dfirst_tokens_, {b_, dim});
    for (std::int64_t b = 0; b < b_; ++b) {
      const Tensor dfirst = first_token(dres, b);
      first_tokens_join_.backward(dfirst, dfirst_tokens.slice_rows(b, b + 1), dfirst);
    }
  }

  // dres holds the gradient of the layer output, dmid that of the stream between the two
  // sublayers. A residual add hands its gradient unchanged to the branch, whose backward
  // reads it in place; where the branch forked off, residual_.backward joins the branch's
  // input gradient into the skip's (in place).
  for (auto it = encoders_.rbegin(); it != encoders_.rend(); ++it) {
    Encoder& e = *it;
    const Tensor input = act(e.input, dim), attn_sum = act(e.attn_sum, dim);
    const Tensor ln1 = act(e.ln1, dim), mlp_sum = act(e.mlp_sum, dim);
    const Tensor fc = act(e.fc_out, wide), gelu = act(e.gelu_out, wide);
    e.ln_2->backward(mlp_sum, dres, dmid);
    ready(e.layer_ln_2);
    e.proj->backward(gelu, dropout_grad(*e.mlp_drop, dmid, dbranch), dwide);
    ready(e.layer_proj);
    gelu_.backward(fc, dwide, dwide);
    e.fc->backward(ln1, dwide, dbranch);
    ready(e.layer_fc);
    residual_.backward(dmid, dbranch, dmid);  // d(ln1) = skip + mlp branch
    e.ln_1->backward(attn_sum, dmid, dres);
    ready(e.layer_ln_1);
    e.attn->backward(input, dropout_grad(*e.attn_drop, dres, dbranch), dbranch_alt, step_);
    ready(e.layer_attn);
    residual_.backward(dres, dbranch_alt, dres);  // d(input) = skip + attention branch
  }
  emb_drop_->backward(dres, dres, step_);
  emb_ln_->backward(act(emb_sum_, dim), dres, dmid);  // dmid: the embedding sum's gradient
  ready(layer_emb_ln_);
  token_type_->backward(types_, dmid);
  ready(layer_token_type_);
  position_->backward_positions(dmid);
  ready(layer_position_);
  word_->backward(batch_.tokens, dmid);
  ready(layer_word_);
}

// For activation_device(), whether bound there or not: the attention caches and their one
// workspace, and the head's slot, depend on the device (the arena's other slots do not).
std::size_t Bert::activation_bytes() const {
  const Device device = activation_device();
  const std::int64_t rows = shape_.micro_batch * shape_.seq_len;
  const auto type_bytes = static_cast<std::size_t>(rows) * sizeof(std::int32_t);
  std::size_t bytes = head_slot_->bytes_on(arena_, device) + type_bytes + emb_ln_->cache_bytes() +
                      mlm_ln_->cache_bytes();
  for (const Encoder& e : encoders_) {
    bytes += e.attn->cache_bytes_on(device) + e.ln_1->cache_bytes() + e.ln_2->cache_bytes();
  }
  bytes += encoders_.empty() ? 0 : encoders_.front().attn->workspace_request(device);
  return bytes + static_cast<std::size_t>(rows + shape_.micro_batch) * sizeof(float);
}

}  // namespace sparq
