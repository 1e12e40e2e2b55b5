// VGG with BatchNorm for small images (CIFAR-10's 32x32 by default): the config's layout
// lists conv widths and M; each width is conv3x3 (padding 1, bias) + BatchNorm2d + ReLU, and
// each M a 2x2 max-pool of stride 2. The classifier is one Linear from the flattened
// features (512 x 1 x 1 for VGG-16 on 32x32 inputs) to num_classes, as in the usual CIFAR
// variants of VGG (the ImageNet 4096-wide head would dwarf the convolutions at this size).
//
// Init as torchvision's VGG: conv weights Kaiming normal (fan_out, ReLU gain), conv biases
// zero, BatchNorm 1/0, classifier weight N(0, 0.01), bias zero.
//
// Parameter names: features.<i>.conv.{weight, bias}, features.<i>.bn.{weight, bias} for the
// i-th convolution (i counts convolutions only), classifier.{weight, bias}.
// Layers, forward order: features.<i>.conv, features.<i>.bn for every i, classifier.
// State (checkpointed, not trained): features.<i>.bn.running_mean / running_var.
//
// Batch: images f32 [B, in_channels, image_size, image_size] with B <= micro_batch, labels
// i32 [B]. Training mode normalises with batch statistics and updates the running ones.
#pragma once

#include <memory>
#include <vector>

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/cross_entropy.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "models/model.h"

namespace sparq {

class Vgg : public Model {
 public:
  Vgg(const ModelConfig& config, RunShape shape);
  // Training batch norm needs more than one value per channel: a conv stage on a 1x1 map
  // with micro-batches of one image aborted at the first step (review, 2026-12-06). An error
  // naming the stage, for the trainer to check before building (its dry run builds for
  // one row).
  static Status check_training_batch(const ModelConfig& config, std::int64_t micro_batch);

  void declare(ParamStore& store) const override;
  float forward(const Batch& batch) override;
  Tensor logits() const override;  // [B, num_classes]
  std::vector<StateTensor> state() const override;
  std::size_t activation_bytes() const override;

 private:
  // One entry of the layout: a conv block, or a max-pool.
  struct Stage {
    std::unique_ptr<Conv2d> conv;
    std::unique_ptr<BatchNorm2d> bn;
    std::unique_ptr<MaxPool2d> pool;
    std::int64_t in_c = 0, out_c = 0, in_hw = 0, out_hw = 0;  // channels and side length
    int pre = -1, out = -1;  // slots: conv output (BN's x) and the stage output
    int layer_conv = -1, layer_bn = -1;
  };

  void bind_layers(const ParamStore& store) override;
  void backward_layers() override;
  Tensor image_view(int slot, std::int64_t c, std::int64_t hw) const;

  std::vector<Stage> stages_;
  std::unique_ptr<Linear> classifier_;
  std::unique_ptr<CrossEntropy> loss_;
  Relu relu_{"relu"};
  ActivationArena arena_;
  int logits_ = -1, dlogits_ = -1;
  int dmap_a_ = -1, dmap_b_ = -1;  // feature-map gradients, used alternately by backward
  int layer_classifier_ = -1;
  std::int64_t features_ = 0;  // classifier input width
  Batch batch_;
  std::int64_t b_ = 0;
};

}  // namespace sparq
