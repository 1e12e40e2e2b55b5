#include "models/vgg.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "layers/conv3x3_scratch.h"

namespace sparq {

Status Vgg::check_training_batch(const ModelConfig& c, std::int64_t micro_batch) {
  std::int64_t side = c.image_size;
  int conv_index = 0;
  for (const std::int64_t item : c.layout) {
    if (item == ModelConfig::kPool) {
      side /= 2;
      continue;
    }
    if (micro_batch * side * side <= 1) {
      return Status::error(
          "{}: features.{}.bn would normalise one value per channel ({} image(s) of {}x{}): "
          "training batch norm needs more; raise train.micro_batch or end model.layout with "
          "a max-pool before that stage",
          c.spec, conv_index, micro_batch, side, side);
    }
    ++conv_index;
  }
  return Status::ok();
}

Vgg::Vgg(const ModelConfig& c, RunShape shape) : Model(c, shape) {
  const std::int64_t batch = shape.micro_batch;
  std::int64_t channels = c.in_channels, side = c.image_size, widest = 0;
  int conv_index = 0;
  for (const std::int64_t item : c.layout) {
    Stage st;
    st.in_c = channels;
    st.in_hw = side;
    if (item == ModelConfig::kPool) {
      st.out_c = channels;
      st.out_hw = side / 2;
      st.pool = std::make_unique<MaxPool2d>(
          "pool" + std::to_string(stages_.size()),
          MaxPool2d::Config{channels, side, side, 2, 2, 0, batch});
    } else {
      const std::string p = "features." + std::to_string(conv_index++);
      st.out_c = item;
      st.out_hw = side;
      Conv2d::Config cc;
      cc.in_channels = channels, cc.out_channels = item, cc.kernel_h = 3, cc.kernel_w = 3;
      cc.stride = 1, cc.padding = 1, cc.bias = true, cc.in_h = side, cc.in_w = side;
      st.conv = std::make_unique<Conv2d>(p + ".conv", cc);
      st.bn = std::make_unique<BatchNorm2d>(p + ".bn",
                                            BatchNorm2d::Config{item, c.bn_eps, c.bn_momentum});
      st.layer_conv = add_layer(st.conv->name(), st.conv->param_names());
      st.layer_bn = add_layer(st.bn->name(), st.bn->param_names());
      st.pre = arena_.reserve(batch * item * side * side);
    }
    // ReLU runs in place on the BN output, so one slot holds both (its backward reads y).
    st.out = arena_.reserve(batch * st.out_c * st.out_hw * st.out_hw);
    widest = std::max({widest, st.in_c * st.in_hw * st.in_hw, st.out_c * st.out_hw * st.out_hw});
    channels = st.out_c;
    side = st.out_hw;
    stages_.push_back(std::move(st));
  }
  features_ = channels * side * side;
  classifier_ = std::make_unique<Linear>("classifier",
                                         Linear::Config{features_, c.num_classes, true, 0.01f});
  layer_classifier_ = add_layer(classifier_->name(), classifier_->param_names());
  loss_ = std::make_unique<CrossEntropy>(
      "loss", CrossEntropy::Config{c.num_classes, c.num_classes, kIgnoreIndex, batch});
  logits_ = arena_.reserve(batch * c.num_classes);
  dlogits_ = arena_.reserve(batch * c.num_classes);
  // Two ping-pong gradient buffers as large as the widest activation.
  dmap_a_ = arena_.reserve(batch * widest);
  dmap_b_ = arena_.reserve(batch * widest);
}

void Vgg::declare(ParamStore& store) const {
  for (const Stage& st : stages_) {
    if (!st.conv) continue;
    st.conv->declare(store);
    st.bn->declare(store);
  }
  classifier_->declare(store);
}

void Vgg::bind_layers(const ParamStore& store) {
  const ExecContext& ctx = store.context();
  if (!shape_.plan_only) arena_.allocate(ctx.device());  // RunShape::plan_only
  loss_->bind_context(ctx);
  relu_.bind_context(ctx);
  for (Stage& st : stages_) {
    if (st.pool) st.pool->bind_context(ctx);
  }
  for (Stage& st : stages_) {
    if (!st.conv) continue;
    st.conv->bind(store);
    st.bn->bind(store);
  }
  classifier_->bind(store);
}

Tensor Vgg::image_view(int slot, std::int64_t c, std::int64_t hw) const {
  return arena_.view(slot, {b_, c, hw, hw});
}

Tensor Vgg::logits() const {
  SPARQ_CHECK(b_ > 0, "{}: logits() before forward()", config_.spec);
  return arena_.view(logits_, {b_, config_.num_classes});
}

std::vector<StateTensor> Vgg::state() const {
  std::vector<StateTensor> out;
  for (const Stage& st : stages_) {
    if (!st.bn) continue;
    out.push_back({st.bn->name() + ".running_mean", st.bn->running_mean()});
    out.push_back({st.bn->name() + ".running_var", st.bn->running_var()});
  }
  return out;
}

float Vgg::forward(const Batch& batch) {
  SPARQ_CHECK(bound(), "{}: forward() before bind()", config_.spec);
  const Tensor& images = batch.images;
  SPARQ_CHECK(images.ndim() == 4 && images.dim(0) >= 1 && images.dim(0) <= shape_.micro_batch,
              "{}: batch.images {} must be [B <= {}, {}, {}, {}]", config_.spec, images.str(),
              shape_.micro_batch, config_.in_channels, config_.image_size, config_.image_size);
  b_ = images.dim(0);
  check_batch_tensor(config_.spec, "images", images, DType::kF32,
                     {b_, config_.in_channels, config_.image_size, config_.image_size});
  check_batch_tensor(config_.spec, "labels", batch.labels, DType::kI32, {b_});
  batch_ = batch;

  Tensor x = images;
  for (Stage& st : stages_) {
    const Tensor y = image_view(st.out, st.out_c, st.out_hw);
    if (st.pool) {
      st.pool->forward(x, y);
    } else {
      const Tensor pre = image_view(st.pre, st.out_c, st.out_hw);
      st.conv->forward(x, pre);
      st.bn->forward(pre, y, training());
      relu_.forward(y, y);
    }
    x = y;
  }
  const Tensor flat = flatten(x);
  classifier_->forward(flat, logits());
  // Note [Eager head gradient] (model.h): a training forward takes the logits' gradient too.
  loss_gradient_taken_ = backward_follows();
  const Tensor dlogits = arena_.view(dlogits_, {b_, config_.num_classes});
  const float loss = loss_gradient_taken_ ? loss_->forward_backward(logits(), batch.labels, dlogits)
                                          : loss_->forward(logits(), batch.labels);
  mark_forward();
  return loss;
}

void Vgg::backward_layers() {
  const Tensor dlogits = arena_.view(dlogits_, {b_, config_.num_classes});
  if (!loss_gradient_taken_) loss_->forward_backward(logits(), batch_.labels, dlogits);
  const Stage& last = stages_.back();
  classifier_->backward(flatten(image_view(last.out, last.out_c, last.out_hw)), dlogits,
                        flatten(image_view(dmap_a_, last.out_c, last.out_hw)));
  ready(layer_classifier_);

  // Two gradient buffers: `cur` holds the gradient of the current stage's output. A pool
  // writes its input gradient to the other buffer; a conv block goes through the other
  // buffer (BN's input gradient) and lands back in `cur` (conv's input gradient).
  int cur = dmap_a_, other = dmap_b_;
  for (std::size_t i = stages_.size(); i-- > 0;) {
    const Stage& st = stages_[i];
    const bool first = i == 0;
    const Tensor dy = image_view(cur, st.out_c, st.out_hw);
    if (st.pool) {
      st.pool->backward(dy, image_view(other, st.in_c, st.in_hw));
      std::swap(cur, other);
      continue;
    }
    const Tensor x = first ? batch_.images : image_view(stages_[i - 1].out, st.in_c, st.in_hw);
    relu_.backward(image_view(st.out, st.out_c, st.out_hw), dy, dy);
    const Tensor dpre = image_view(other, st.out_c, st.out_hw);
    st.bn->backward(image_view(st.pre, st.out_c, st.out_hw), dy, dpre);
    ready(st.layer_bn);
    // The first convolution needs no input gradient: the images are data.
    st.conv->backward(x, dpre, first ? Tensor() : image_view(cur, st.in_c, st.in_hw));
    ready(st.layer_conv);
  }
}

std::size_t Vgg::activation_bytes() const {
  // The convolutions' im2col areas and the 3x3 fast path's workspace are the CPU path's:
  // a GPU run (or a dry run planning one) has cuDNN's instead, which Conv2d::bind frees them
  // for. They were counted for the GPU too, 47 MiB of VGG-16's 47 (review, 2026-12-07).
  const bool host_convolutions = activation_device() == Device::kCPU;
  std::size_t bytes = arena_.bytes();
  for (const Stage& st : stages_) {
    if (st.pool) bytes += st.pool->cache_bytes();
    if (st.conv) bytes += (host_convolutions ? st.conv->cache_bytes() : 0) + st.bn->cache_bytes();
  }
  // The 3x3 fast path's workspace is shared by its layers (layers/conv3x3_scratch.h): its
  // current size is the largest live layer's need, this model's included.
  if (host_convolutions) {
    bytes += static_cast<std::size_t>(Conv3x3Scratch::size_floats()) * sizeof(float);
  }
  return bytes + static_cast<std::size_t>(shape_.micro_batch) * sizeof(float);
}

}  // namespace sparq
