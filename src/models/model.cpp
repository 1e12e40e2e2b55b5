#include "models/model.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/check.h"
#include "core/tensor_copy.h"
#include "layers/row_predictions.h"
#include "models/bert.h"
#include "models/gpt2.h"
#include "models/model_registry.h"
#include "models/vgg.h"

namespace sparq {

Model::Model(ModelConfig config, RunShape shape) : config_(std::move(config)), shape_(shape) {
  step_.training = true;
}

int Model::add_layer(std::string name, std::vector<std::string> tensors) {
  SPARQ_CHECK(!tensors.empty(), "{}: layer '{}' has no parameters", config_.spec, name);
  layers_.push_back({std::move(name), std::move(tensors)});
  return static_cast<int>(layers_.size()) - 1;
}

void Model::bind(const ParamStore& store) {
  SPARQ_CHECK(store.allocated(), "{}: bind() before ParamStore::allocate()", config_.spec);
  bind_layers(store);
  ranges_.clear();
  for (const LayerParams& layer : layers_) {
    std::vector<ParamRange> ranges;
    for (const std::string& name : layer.tensors) ranges.push_back(store.entry(name).range());
    ranges_.push_back(std::move(ranges));
  }
  store_ = &store;
}

const ParamStore& Model::store() const {
  SPARQ_CHECK(store_ != nullptr, "{}: used before bind()", config_.spec);
  return *store_;
}

void Model::backward(const GradReadyFn& on_ready) {
  SPARQ_CHECK(store_ != nullptr, "{}: backward() before bind()", config_.spec);
  SPARQ_CHECK(has_forward_, "{}: backward() without a forward() since the last backward()",
              config_.spec);
  on_ready_ = on_ready ? &on_ready : nullptr;
  next_ready_ = static_cast<int>(layers_.size()) - 1;
  reported_early_ = -1;
  // Note [Backward differentiates its forward] (model.h): the layers read step_, so it is
  // the forward's for the duration of the backward.
  const DropoutStep current = step_;
  if (forward_step_) step_ = *forward_step_;
  backward_layers();
  step_ = current;
  forward_step_.reset();
  // Every layer must have reported, or the scheduler would wait forever on a bucket.
  SPARQ_CHECK(next_ready_ == -1, "{}: backward finished with layer '{}' never reported",
              config_.spec, layers_[next_ready_].name);
  on_ready_ = nullptr;
  has_forward_ = false;
  head_gradient_added_ = false;
  loss_gradient_taken_ = false;
}

float Model::forward_for_backward(const Batch& batch) {
  forward_step_ = step_;  // Note [Backward differentiates its forward], model.h
  backward_follows_ = true;
  const float loss = forward(batch);
  backward_follows_ = false;
  // An embedder's forward() need not know the base class's bookkeeping (review, 2026-12-07:
  // a model written as docs/embedding.md says aborted at backward()).
  has_forward_ = true;
  return loss;
}

float Model::forward_for_evaluation(const Batch& batch) {
  const float loss = forward(batch);
  mark_forward();  // as above: score() needs it
  return loss;
}

void Model::mark_head_gradient_added() {
  SPARQ_CHECK(!head_gradient_added_,
              "{}: a second forward_for_backward() before backward() would add the fused "
              "head's gradient twice (Note [Eager head gradient])",
              config_.spec);
  head_gradient_added_ = true;
}

void Model::ready(int layer_index) {
  SPARQ_CHECK(layer_index == next_ready_,
              "{}: layer {} ('{}') reported ready out of order, expected layer {}", config_.spec,
              layer_index, layers_.at(layer_index).name, next_ready_);
  --next_ready_;
  if (on_ready_ != nullptr && layer_index != reported_early_) {
    (*on_ready_)(GradReady{layer_index, &layers_[layer_index], &ranges_[layer_index]});
  }
}

void Model::report_early(int layer_index) {
  SPARQ_CHECK(reported_early_ < 0 && layer_index < next_ready_,
              "{}: layer {} ('{}') reported early twice or after its turn", config_.spec,
              layer_index, layers_.at(layer_index).name);
  reported_early_ = layer_index;
  if (on_ready_ != nullptr) {
    (*on_ready_)(GradReady{layer_index, &layers_[layer_index], &ranges_[layer_index]});
  }
}

void Model::set_tied_split(bool split) {
  SPARQ_CHECK(!split || !tied_embedding().empty(), "{}: has no tied embedding to split",
              config_.spec);
  tied_split_ = split;
}

void Model::check_token_batch(const Batch& batch, std::int64_t* b, std::int64_t* t) const {
  SPARQ_CHECK(store_ != nullptr, "{}: forward() before bind()", config_.spec);
  // A plain forward() after forward_for_backward() would leave the fused head's gradient of
  // the first batch in the table while backward() ran on the second batch's activations
  // (review, 2026-12-05): silently wrong gradients, so refused.
  SPARQ_CHECK(backward_follows_ || !head_gradient_added_,
              "{}: forward() between forward_for_backward() and backward() would pair the "
              "first batch's head gradient with this batch (Note [Eager head gradient])",
              config_.spec);
  const Tensor& tokens = batch.tokens;
  SPARQ_CHECK(tokens.ndim() == 2 && tokens.dim(0) >= 1 && tokens.dim(0) <= shape_.micro_batch &&
                  tokens.dim(1) >= 1 && tokens.dim(1) <= shape_.seq_len,
              "{}: batch.tokens {} must be [B <= {}, T <= {}]", config_.spec, tokens.str(),
              shape_.micro_batch, shape_.seq_len);
  *b = tokens.dim(0);
  *t = tokens.dim(1);
  check_batch_tensor(config_.spec, "tokens", tokens, DType::kI32, {*b, *t});
  check_batch_tensor(config_.spec, "targets", batch.targets, DType::kI32, {*b, *t});
}

void Model::check_logits_readable(std::int64_t rows) const {
  SPARQ_CHECK(rows > 0, "{}: logits() before forward()", config_.spec);
  SPARQ_CHECK(!fused_head_,
              "{}: the fused head keeps no logits; build the model with "
              "fused_head=0 to read them",
              config_.spec);
  SPARQ_CHECK(!loss_gradient_taken_,
              "{}: after forward_for_backward() the logits buffer holds their gradient (Note "
              "[Eager head gradient]); read logits after a plain forward()",
              config_.spec);
}

Tensor Model::dropout_grad(const Dropout& drop, const Tensor& dy, const Tensor& scratch) const {
  if (!step_.training || drop.p() == 0.0f) return dy;
  drop.backward(dy, scratch, step_);
  return scratch;
}

// score() from each row's prediction (Note [Prediction rule]): the fused head's, recorded by
// its forward, or those of the logits.
Model::Score Model::score_predictions(const std::vector<std::int32_t>& predicted,
                                      const Tensor& targets) const {
  SPARQ_CHECK(targets.dtype() == DType::kI32, "{}: targets must be int32, got {}", config_.spec,
              targets.str());
  SPARQ_CHECK(static_cast<std::int64_t>(predicted.size()) == targets.numel(),
              "{}: score() needs the batch of the last forward()", config_.spec);
  std::vector<std::int32_t> y(static_cast<std::size_t>(targets.numel()));
  copy_to_host(targets, y.data());
  Score s;
  for (std::size_t r = 0; r < y.size(); ++r) {
    if (y[r] == kIgnoreIndex) continue;
    ++s.count;
    s.correct += predicted[r] == y[r];
  }
  return s;
}

Model::Score Model::score(const Batch& batch) const {
  SPARQ_CHECK(has_forward_, "{}: score() needs a forward() and no backward() since", config_.spec);
  Score s = counted_targets(batch);
  s.unscored_loss = unscored_loss_;
  return s;
}

Model::Score Model::counted_targets(const Batch& batch) const {
  const bool lm = config_.is_language_model();
  if (const std::vector<std::int32_t>* predicted = head_predictions()) {
    return score_predictions(*predicted, batch.targets);
  }
  const Tensor z = logits();
  const Tensor& targets = lm ? batch.targets : batch.labels;
  // LM logits are [B, T, padded_vocab] against targets [B, T]; VGG's [B, K] against [B].
  const Shape expected = lm ? Shape{z.dim(0), z.dim(1)} : Shape{z.dim(0)};
  check_batch_tensor(config_.spec, lm ? "targets" : "labels", targets, DType::kI32, expected);
  const std::int64_t width = z.dim(-1);
  const std::int64_t real = lm ? config_.vocab_size : width;  // columns that can be predicted
  // Note [Prediction rule]: a device model's rows are reduced on the device, and only the
  // predictions come to the host.
  std::vector<std::int32_t> predicted(static_cast<std::size_t>(targets.numel()));
  row_predictions(z, real, predicted.data(), store().context(), prediction_scratch_);
  return score_predictions(predicted, targets);
}

std::int64_t count_counted_targets(const Tensor& targets) {
  SPARQ_CHECK(targets.dtype() == DType::kI32 && targets.is_cpu(),
              "counting targets needs host int32 targets, got {}", targets.str());
  const std::int32_t* y = targets.data<std::int32_t>();
  return std::count_if(y, y + targets.numel(), [](std::int32_t v) { return v != kIgnoreIndex; });
}

std::int64_t Model::counted_target_count(const Batch& batch) const {
  if (batch.counted_targets >= 0) return batch.counted_targets;
  const Tensor& targets = batch.targets;
  SPARQ_CHECK(targets.dtype() == DType::kI32, "{}: targets must be int32, got {}", config_.spec,
              targets.str());
  if (targets.is_cpu()) return count_counted_targets(targets);
  std::vector<std::int32_t> staging(static_cast<std::size_t>(targets.numel()));
  copy_to_host(targets, staging.data());
  return count_counted_targets(Tensor(staging.data(), DType::kI32, targets.shape()));
}

std::int64_t Model::param_count() const {
  ParamStore scratch;
  declare(scratch);
  return scratch.param_count();
}

std::string Model::summary() const {
  const double mib = static_cast<double>(activation_bytes()) / (1 << 20);
  if (config_.is_language_model()) {
    return fmt::format("model {}: {} parameters in {} layers, activations {:.1f} MiB for B={} T={}",
                       config_.spec, param_count(), layers_.size(), mib, shape_.micro_batch,
                       shape_.seq_len);
  }
  return fmt::format("model {}: {} parameters in {} layers, activations {:.1f} MiB for B={} "
                     "images of {}x{}x{}",
                     config_.spec, param_count(), layers_.size(), mib, shape_.micro_batch,
                     config_.in_channels, config_.image_size, config_.image_size);
}

Result<std::unique_ptr<Model>> make_model(const ModelConfig& config, RunShape shape) {
  SPARQ_RETURN_IF_ERROR(validate_model_config(config));
  if (shape.micro_batch < 1) {
    return Status::error("{}: micro_batch must be at least 1, got {}", config.spec,
                         shape.micro_batch);
  }
  if (config.is_language_model() && (shape.seq_len < 1 || shape.seq_len > config.n_ctx)) {
    return Status::error("{}: seq_len {} must be in [1, n_ctx = {}]", config.spec, shape.seq_len,
                         config.n_ctx);
  }
  SPARQ_RETURN_IF_ERROR(check_attention_dropout_draws(config, shape.micro_batch, shape.seq_len));
  std::unique_ptr<Model> model;
  if (auto registered = find_registered_model(config.preset); registered.is_ok()) {
    SPARQ_ASSIGN_OR_RETURN(model, registered->factory(config, shape));
    if (!model) return Status::error("{}: the registered factory returned no model", config.spec);
    spdlog::debug("{}", model->summary());  // debug: as the built-in models' below
    return model;
  }
  switch (config.arch) {
    case ModelArch::kGpt2: model.reset(new Gpt2(config, shape)); break;
    case ModelArch::kBert: model.reset(new Bert(config, shape)); break;
    case ModelArch::kVgg: model.reset(new Vgg(config, shape)); break;
  }
  if (!model) return Status::error("{}: unsupported architecture", config.spec);
  // Parameter count and activation memory for this micro-batch, at debug level: the trainer's
  // start-up report (Trainer::describe) has it, and a library prints nothing of its own in a
  // dry run (docs/embedding.md); every rank logged it at info, a dry run too (review,
  // 2026-12-07).
  spdlog::debug("{}", model->summary());
  return model;
}

int ActivationArena::reserve(std::int64_t numel) {
  SPARQ_CHECK(buffer_.data() == nullptr, "ActivationArena: reserve() after allocate()");
  SPARQ_CHECK(numel > 0, "ActivationArena: reserve({}) must be positive", numel);
  offsets_.push_back(total_);
  sizes_.push_back(numel);
  // 64-float alignment keeps every activation on its own cache lines and SIMD-aligned.
  total_ += static_cast<std::int64_t>(bytes_for(numel) / sizeof(float));
  return static_cast<int>(offsets_.size()) - 1;
}

void ActivationArena::allocate(Device device) {
  SPARQ_CHECK(buffer_.data() == nullptr, "ActivationArena: allocate() called twice");
  device_ = device;
  buffer_ = device == Device::kCPU ? Buffer::host(bytes(), /*zeroed=*/true)
                                   : Buffer::device(bytes(), /*zeroed=*/true);
}

float* ActivationArena::data(int slot) const {
  SPARQ_CHECK(buffer_.data() != nullptr, "ActivationArena: used before allocate()");
  return buffer_.as<float>() + offsets_.at(slot);
}

Tensor ActivationArena::view(int slot, Shape shape) const {
  SPARQ_CHECK(shape.numel() <= sizes_.at(slot),
              "ActivationArena: view {} of slot {} exceeds its {} reserved floats", shape.str(),
              slot, sizes_[slot]);
  return Tensor(data(slot), DType::kF32, shape, device_);
}

void check_batch_tensor(const std::string& model, const char* field, const Tensor& t, DType dtype,
                        const Shape& shape) {
  SPARQ_CHECK(!t.empty(), "{}: batch.{} is missing", model, field);
  SPARQ_CHECK(t.dtype() == dtype && t.shape() == shape, "{}: batch.{} is {}, expected {}{}",
              model, field, t.str(), dtype_name(dtype), shape.str());
}

}  // namespace sparq
