// Image classification batches (CIFAR-10 or synthetic) with normalisation and, for training,
// the standard augmentation: a random 32x32 crop of the image zero-padded by 4 pixels on
// every side (padding is black before normalisation, as torchvision's RandomCrop does), then
// a horizontal flip with probability 1/2. Evaluation (augment = false) only normalises.
// Images are distributed by EpochSampler (sampler.h). The crop offsets and flip of image i in
// epoch e come from philox4x32(seed, data_stream(kAugment, e), i): independent of the rank,
// the world size and the batch order.
#pragma once

#include <memory>

#include "core/buffer.h"
#include "core/tensor.h"
#include "data/image_dataset.h"
#include "data/sampler.h"

namespace sparq::data {

struct ImageLoaderConfig {
  bool augment = true;
  int pad = 4;                         // crop padding in pixels
  ChannelStats stats = kCifar10Stats;  // value = (pixel / 255 - mean) / std per channel
  SamplerConfig sampler;
};

struct ImageBatch {
  Tensor images;                       // f32 [micro_batch, 3, 32, 32]
  Tensor labels;                       // i32 [micro_batch]
  std::vector<std::uint64_t> indices;  // dataset index of each row, or kPaddingItem
};

class ImageLoader {
 public:
  static Result<ImageLoader> create(std::shared_ptr<const ImageDataset> data,
                                    const ImageLoaderConfig& config);

  const ImageBatch& next();
  std::uint64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  LoaderState state() const { return sampler_.state(); }
  Status restore(const LoaderState& state) { return sampler_.restore(state); }

 private:
  ImageLoader(std::shared_ptr<const ImageDataset> data, ImageLoaderConfig config,
              EpochSampler sampler);

  std::shared_ptr<const ImageDataset> data_;
  ImageLoaderConfig config_;
  EpochSampler sampler_;
  Buffer image_buf_, label_buf_;
  ImageBatch batch_;
};

}  // namespace sparq::data
