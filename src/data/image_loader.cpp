#include "data/image_loader.h"

#include "core/rng.h"

namespace sparq::data {

Result<ImageLoader> ImageLoader::create(std::shared_ptr<const ImageDataset> data,
                                        const ImageLoaderConfig& config) {
  if (!data) return Status::error("image loader needs a dataset");
  if (config.pad < 0 || config.pad > ImageDataset::kHeight)
    return Status::error("crop padding {} is out of range", config.pad);
  for (int c = 0; c < 3; ++c) {
    if (!(config.stats.std[c] > 0))
      return Status::error("channel {} std must be positive, got {}", c, config.stats.std[c]);
  }
  auto sampler = EpochSampler::create(data->size(), config.sampler);
  if (!sampler.is_ok()) return sampler.status().with_context("image loader");
  return ImageLoader(std::move(data), config, std::move(sampler).value());
}

ImageLoader::ImageLoader(std::shared_ptr<const ImageDataset> data, ImageLoaderConfig config,
                         EpochSampler sampler)
    : data_(std::move(data)), config_(config), sampler_(std::move(sampler)) {
  const std::int64_t b = config_.sampler.micro_batch;
  image_buf_ =
      Buffer::host(static_cast<std::size_t>(b) * ImageDataset::kImageBytes * sizeof(float));
  label_buf_ = Buffer::host(static_cast<std::size_t>(b) * sizeof(std::int32_t));
  batch_.images = image_buf_.view(
      DType::kF32, Shape{b, ImageDataset::kChannels, ImageDataset::kHeight, ImageDataset::kWidth});
  batch_.labels = label_buf_.view(DType::kI32, Shape{b});
}

const ImageBatch& ImageLoader::next() {
  constexpr int kH = ImageDataset::kHeight, kW = ImageDataset::kWidth;
  const std::uint64_t epoch = sampler_.state().epoch;
  sampler_.next(&batch_.indices);
  float* images = batch_.images.data<float>();
  std::int32_t* labels = batch_.labels.data<std::int32_t>();
  const std::uint64_t stream = data_stream(DataStream::kAugment, epoch);
  const int span = 2 * config_.pad + 1;
  for (std::size_t row = 0; row < batch_.indices.size(); ++row) {
    // Evaluation's padding (sampler.h): image 0, its label ignored.
    const bool padding = batch_.indices[row] == kPaddingItem;
    const std::uint64_t index = padding ? 0 : batch_.indices[row];
    labels[row] = padding ? kIgnoreLabel : data_->labels[index];
    int dx = 0, dy = 0;
    bool flip = false;
    if (config_.augment) {
      const auto draw = philox4x32(config_.sampler.seed, stream, index);
      dx = static_cast<int>(draw[0] % span) - config_.pad;  // span <= 65: bias is negligible
      dy = static_cast<int>(draw[1] % span) - config_.pad;
      flip = draw[2] & 1;
    }
    const std::uint8_t* src = data_->image(index);
    float* dst = images + row * ImageDataset::kImageBytes;
    for (int c = 0; c < ImageDataset::kChannels; ++c) {
      const float scale = 1.0f / (255.0f * config_.stats.std[c]);
      const float shift = -config_.stats.mean[c] / config_.stats.std[c];
      for (int y = 0; y < kH; ++y) {
        const int sy = y + dy;
        for (int x = 0; x < kW; ++x) {
          const int sx = (flip ? kW - 1 - x : x) + dx;
          const bool inside = sy >= 0 && sy < kH && sx >= 0 && sx < kW;
          const float pixel = inside ? src[(c * kH + sy) * kW + sx] : 0.0f;
          dst[(c * kH + y) * kW + x] = pixel * scale + shift;
        }
      }
    }
  }
  return batch_;
}

}  // namespace sparq::data
