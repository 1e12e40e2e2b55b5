// Small image classification data held in memory as 8-bit pixels: CIFAR-10 from its binary
// files, or class-conditional synthetic images for smoke runs without any files.
//
// CIFAR-10 binary format (data_batch_1..5.bin, test_batch.bin): records of 3073 bytes, one
// label byte (0-9) then 1024 red, 1024 green and 1024 blue bytes, each plane row-major 32x32.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace sparq::data {

struct ImageDataset {
  static constexpr int kChannels = 3, kHeight = 32, kWidth = 32;
  static constexpr std::size_t kImageBytes = kChannels * kHeight * kWidth;
  static constexpr int kMaxClasses = 256;  // labels are bytes

  std::vector<std::uint8_t> pixels;  // count * kImageBytes, channel planes (CHW) per image
  std::vector<std::uint8_t> labels;  // count
  int num_classes = 10;

  std::size_t size() const { return labels.size(); }
  const std::uint8_t* image(std::size_t i) const { return pixels.data() + i * kImageBytes; }
};

// Loads and concatenates CIFAR-10 binary files in the given order. Fails (naming the file)
// when a file is missing, its size is not a multiple of 3073, or a label is above 9.
Result<ImageDataset> load_cifar10(const std::vector<std::string>& files);
// data_batch_1..5.bin (those present, at least one) or test_batch.bin from a directory.
Result<ImageDataset> load_cifar10_dir(const std::string& dir, bool train);

struct SyntheticImageConfig {
  std::size_t count = 10000;
  int num_classes = 10;  // at most ImageDataset::kMaxClasses
  float noise = 24.0f;   // std of the per-pixel Gaussian noise, in 0..255 units
  // Picks the classes (their prototypes) and the sequence of samples drawn from them.
  std::uint64_t seed = 0;
  // Image i is sample first_index + i of the seed's sequence: its label and noise come from
  // that index, its prototype from the seed alone. An evaluation set of the same classes
  // therefore keeps the seed and starts where the training set ends (synthetic_eval_config).
  std::uint64_t first_index = 0;
};

// Class-conditional images: each class has a prototype (a base colour plus an oriented
// sinusoidal stripe pattern, both drawn from the seed), and each image is its class's
// prototype plus independent Gaussian noise, clamped to 0..255. Labels are drawn uniformly.
// Image i depends only on (seed, first_index + i), so any subset can be regenerated. Fails,
// naming num_classes, above kMaxClasses (labels are bytes).
Result<ImageDataset> make_synthetic_images(const SyntheticImageConfig& config);

// The evaluation set that goes with the training set `train`: `count` new samples of the same
// classes (same seed, so the same prototypes), the ones after the training samples.
SyntheticImageConfig synthetic_eval_config(const SyntheticImageConfig& train, std::size_t count);

// Per-channel mean and standard deviation of the pixels, scaled to [0, 1].
struct ChannelStats {
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
};
ChannelStats channel_stats(const ImageDataset& data);

// The commonly published CIFAR-10 training-set statistics.
inline constexpr ChannelStats kCifar10Stats = {{0.4914f, 0.4822f, 0.4465f},
                                               {0.2470f, 0.2435f, 0.2616f}};

}  // namespace sparq::data
