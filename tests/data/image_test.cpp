// CIFAR-10 reader, image loader (normalisation, crop and flip augmentation) and the
// class-conditional synthetic images.
#include <gtest/gtest.h>

#include <cmath>

#include "common/shared_data.h"
#include "core/file_io.h"
#include "data/image_dataset.h"
#include "data/image_loader.h"

namespace sparq::data {
namespace {

std::shared_ptr<ImageDataset> tiny_dataset(std::size_t n) {
  auto d = std::make_shared<ImageDataset>();
  d->labels.resize(n);
  d->pixels.resize(n * ImageDataset::kImageBytes);
  for (std::size_t i = 0; i < n; ++i) {
    d->labels[i] = static_cast<std::uint8_t>(i % 10);
    for (std::size_t k = 0; k < ImageDataset::kImageBytes; ++k)
      d->pixels[i * ImageDataset::kImageBytes + k] = static_cast<std::uint8_t>((k * 7 + i) % 251);
  }
  return d;
}

ImageLoaderConfig loader_config(bool augment, int micro) {
  ImageLoaderConfig c;
  c.augment = augment;
  c.sampler.micro_batch = micro;
  c.sampler.seed = 5;
  return c;
}

float normalized(const ImageLoaderConfig& c, int ch, float pixel) {
  return (pixel / 255.0f - c.stats.mean[ch]) / c.stats.std[ch];
}

TEST(ImageLoader, EvalOnlyNormalizes) {
  auto data = tiny_dataset(8);
  const auto config = loader_config(false, 4);
  auto loader = ImageLoader::create(data, config).value();
  const ImageBatch& b = loader.next();
  ASSERT_EQ(b.images.shape(), (Shape{4, 3, 32, 32}));
  for (int row = 0; row < 4; ++row) {
    const std::uint64_t idx = b.indices[row];
    EXPECT_EQ(b.labels.data<std::int32_t>()[row], data->labels[idx]);
    for (std::size_t k = 0; k < ImageDataset::kImageBytes; k += 97) {
      const int ch = static_cast<int>(k / 1024);
      EXPECT_NEAR(b.images.data<float>()[row * ImageDataset::kImageBytes + k],
                  normalized(config, ch, data->image(idx)[k]), 1e-5);
    }
  }
}

TEST(ImageLoader, AugmentationIsACropOfThePaddedImagePossiblyFlipped) {
  auto data = tiny_dataset(64);
  const auto config = loader_config(true, 64);
  auto loader = ImageLoader::create(data, config).value();
  const ImageBatch& b = loader.next();
  int flips = 0, shifted = 0;
  for (int row = 0; row < 64; ++row) {
    const std::uint8_t* src = data->image(b.indices[row]);
    const float* out = b.images.data<float>() + row * ImageDataset::kImageBytes;
    int matches = 0;
    for (int flip = 0; flip < 2; ++flip) {
      for (int dy = -4; dy <= 4; ++dy) {
        for (int dx = -4; dx <= 4; ++dx) {
          bool ok = true;
          for (int c = 0; c < 3 && ok; ++c) {
            for (int y = 0; y < 32 && ok; ++y) {
              for (int x = 0; x < 32 && ok; ++x) {
                const int sy = y + dy, sx = (flip ? 31 - x : x) + dx;
                const float p = (sy >= 0 && sy < 32 && sx >= 0 && sx < 32)
                                    ? src[(c * 32 + sy) * 32 + sx]
                                    : 0.0f;
                ok = std::abs(out[(c * 32 + y) * 32 + x] - normalized(config, c, p)) < 1e-5f;
              }
            }
          }
          if (ok) {
            ++matches;
            flips += flip;
            shifted += (dx != 0 || dy != 0);
          }
        }
      }
    }
    EXPECT_EQ(matches, 1) << "row " << row << " is not exactly one crop/flip of its source";
  }
  EXPECT_GT(flips, 15);  // about half of 64
  EXPECT_LT(flips, 49);
  EXPECT_GT(shifted, 50);
}

TEST(Cifar10, RejectsMalformedFiles) {
  const std::string path = ::testing::TempDir() + "/bad_cifar.bin";
  ASSERT_TRUE(write_file_atomic(path, std::string(3073 * 2 + 1, '\0')).is_ok());
  auto r = load_cifar10({path});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("multiple of 3073"), std::string::npos);
  std::string record(3073, '\0');
  record[0] = 12;
  ASSERT_TRUE(write_file_atomic(path, record).is_ok());
  EXPECT_NE(load_cifar10({path}).status().message().find("label 12"), std::string::npos);
  EXPECT_FALSE(load_cifar10_dir("/nonexistent", true).is_ok());
}

TEST(Cifar10, RealTestBatch) {
  SPARQ_REQUIRE_SHARED_DATA(dir, "cifar-10-bin");
  auto data = load_cifar10_dir(dir, /*train=*/false);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  ASSERT_EQ(data->size(), 10000u);
  for (std::size_t i = 0; i < 100; ++i)
    EXPECT_EQ(data->labels[i], i % 10);  // documented interleaving
  const ChannelStats s = channel_stats(*data);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(s.mean[c], kCifar10Stats.mean[c], 0.02) << c;
    EXPECT_NEAR(s.std[c], kCifar10Stats.std[c], 0.02) << c;
  }
}

TEST(SyntheticImages, DeterministicAndClassSeparable) {
  SyntheticImageConfig config;
  config.count = 400;
  config.seed = 3;
  const ImageDataset a = make_synthetic_images(config), b = make_synthetic_images(config);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
  // Nearest class mean (fitted on the first half) classifies the second half.
  std::vector<std::vector<double>> mean(10, std::vector<double>(ImageDataset::kImageBytes, 0.0));
  std::vector<int> count(10, 0);
  for (std::size_t i = 0; i < 200; ++i) {
    ++count[a.labels[i]];
    for (std::size_t k = 0; k < ImageDataset::kImageBytes; ++k)
      mean[a.labels[i]][k] += a.image(i)[k];
  }
  for (int c = 0; c < 10; ++c) {
    ASSERT_GT(count[c], 0);
    for (double& v : mean[c]) v /= count[c];
  }
  int correct = 0;
  for (std::size_t i = 200; i < 400; ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int c = 0; c < 10; ++c) {
      double d = 0;
      for (std::size_t k = 0; k < ImageDataset::kImageBytes; ++k)
        d += std::pow(a.image(i)[k] - mean[c][k], 2);
      if (d < best_d) best_d = d, best = c;
    }
    correct += best == a.labels[i];
  }
  EXPECT_GT(correct, 190);
  config.seed = 4;
  EXPECT_NE(make_synthetic_images(config).pixels, a.pixels);
}

}  // namespace
}  // namespace sparq::data
