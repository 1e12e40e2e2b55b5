#include "data/image_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>

#include "core/file_io.h"
#include "core/rng.h"
#include "data/sampler.h"

namespace sparq::data {

Result<ImageDataset> load_cifar10(const std::vector<std::string>& files) {
  if (files.empty()) return Status::error("no CIFAR-10 files given");
  constexpr std::size_t kRecord = 1 + ImageDataset::kImageBytes;
  ImageDataset data;
  for (const std::string& file : files) {
    SPARQ_ASSIGN_OR_RETURN(const std::string bytes, read_file(file));
    if (bytes.empty() || bytes.size() % kRecord != 0) {
      return Status::error(
          "'{}' is not a CIFAR-10 binary file: {} bytes is not a multiple of {}-byte records", file,
          bytes.size(), kRecord);
    }
    const std::size_t n = bytes.size() / kRecord;
    const std::size_t base = data.labels.size();
    data.labels.resize(base + n);
    data.pixels.resize((base + n) * ImageDataset::kImageBytes);
    for (std::size_t i = 0; i < n; ++i) {
      const auto* record = reinterpret_cast<const std::uint8_t*>(bytes.data()) + i * kRecord;
      if (record[0] > 9)
        return Status::error("'{}': record {} has label {} (expected 0-9)", file, i, record[0]);
      data.labels[base + i] = record[0];
      std::copy_n(record + 1, ImageDataset::kImageBytes,
                  data.pixels.data() + (base + i) * ImageDataset::kImageBytes);
    }
  }
  return data;
}

Result<ImageDataset> load_cifar10_dir(const std::string& dir, bool train) {
  namespace fs = std::filesystem;
  // A batch file given for its folder was "no data_batch_*.bin in '.../data_batch_1.bin' (run
  // scripts/get_data.sh cifar10)" (review, 2026-12-08).
  std::error_code is_file_ec;
  if (fs::is_regular_file(dir, is_file_ec)) {
    return Status::error("'{}' is a file: name the folder that holds {}", dir,
                         train ? "data_batch_1.bin .. data_batch_5.bin" : "test_batch.bin");
  }
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) {
      const fs::path p = fs::path(dir) / ("data_batch_" + std::to_string(i) + ".bin");
      std::error_code ec;  // the throwing form ended the job on EACCES or ENAMETOOLONG
      if (fs::exists(p, ec)) files.push_back(p.string());
      // A batch that cannot be looked up is not skipped (training on fewer batches).
      if (ec) return Status::error("cannot look up '{}': {}", p.string(), ec.message());
    }
    if (files.empty())
      return Status::error("no data_batch_*.bin in '{}' (run scripts/get_data.sh cifar10)", dir);
  } else {
    const fs::path p = fs::path(dir) / "test_batch.bin";
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      if (ec) return Status::error("cannot look up '{}': {}", p.string(), ec.message());
      return Status::error("no test_batch.bin in '{}' (run scripts/get_data.sh cifar10)", dir);
    }
    files.push_back(p.string());
  }
  return load_cifar10(files);
}

Result<ImageDataset> make_synthetic_images(const SyntheticImageConfig& config) {
  constexpr int kC = ImageDataset::kChannels, kH = ImageDataset::kHeight, kW = ImageDataset::kWidth;
  if (config.num_classes > ImageDataset::kMaxClasses) {
    return Status::error("synthetic images: num_classes {} exceeds {} (labels are stored as bytes)",
                         config.num_classes, ImageDataset::kMaxClasses);
  }
  if (config.num_classes < 1) {
    return Status::error("synthetic images: num_classes {} must be at least 1", config.num_classes);
  }
  const int classes = config.num_classes;
  // Prototype parameters per class: colour (3), stripe frequency, angle, phase, amplitude.
  std::vector<std::array<float, 7>> proto(static_cast<std::size_t>(classes));
  const std::uint64_t proto_stream = data_stream(DataStream::kSyntheticImages, 0);
  for (int c = 0; c < classes; ++c) {
    const auto u = [&](int k) {
      return uniform_at(config.seed, proto_stream, static_cast<std::uint64_t>(c) * 8 + k);
    };
    proto[c] = {60 + 140 * u(0),
                60 + 140 * u(1),
                60 + 140 * u(2),
                0.15f + 0.6f * u(3),
                std::numbers::pi_v<float> * u(4),
                2 * std::numbers::pi_v<float> * u(5),
                30 + 40 * u(6)};
  }
  ImageDataset data;
  data.num_classes = classes;
  data.labels.resize(config.count);
  data.pixels.resize(config.count * ImageDataset::kImageBytes);
  const std::uint64_t noise_stream = data_stream(DataStream::kSyntheticImages, 1);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < config.count; ++i) {
    // The prototypes above use indices below 2^11 of this stream, the labels 2^40 onwards.
    const std::uint64_t sample = config.first_index + i;
    const int label =
        static_cast<int>(random_u32_at(config.seed, proto_stream, (1ull << 40) + sample) % classes);
    data.labels[i] = static_cast<std::uint8_t>(label);
    const auto& p = proto[label];
    const float cs = std::cos(p[4]), sn = std::sin(p[4]);
    std::uint8_t* out = data.pixels.data() + i * ImageDataset::kImageBytes;
    for (int ch = 0; ch < kC; ++ch) {
      for (int y = 0; y < kH; ++y) {
        for (int x = 0; x < kW; ++x) {
          const std::size_t k = (static_cast<std::size_t>(ch) * kH + y) * kW + x;
          const float stripe = std::sin(p[3] * (cs * x + sn * y) + p[5] + ch);
          const float v = p[ch] + p[6] * stripe +
                          config.noise * normal_at(config.seed, noise_stream,
                                                   sample * ImageDataset::kImageBytes + k);
          out[k] = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
        }
      }
    }
  }
  return data;
}

SyntheticImageConfig synthetic_eval_config(const SyntheticImageConfig& train, std::size_t count) {
  SyntheticImageConfig eval = train;
  eval.count = count;
  // Not another seed: that would draw other prototypes, so eval class c would be a different
  // picture from training class c and a trained model would score near chance.
  eval.first_index = train.first_index + train.count;
  return eval;
}

ChannelStats channel_stats(const ImageDataset& data) {
  ChannelStats stats;
  constexpr std::size_t kPlane = ImageDataset::kHeight * ImageDataset::kWidth;
  for (int ch = 0; ch < ImageDataset::kChannels; ++ch) {
    double sum = 0, sum_sq = 0;
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::uint8_t* plane = data.image(i) + ch * kPlane;
      for (std::size_t k = 0; k < kPlane; ++k) {
        sum += plane[k];
        sum_sq += static_cast<double>(plane[k]) * plane[k];
      }
    }
    const double n = static_cast<double>(data.size() * kPlane);
    const double mean = n > 0 ? sum / n : 0;
    const double var = n > 0 ? std::max(0.0, sum_sq / n - mean * mean) : 0;
    stats.mean[ch] = static_cast<float>(mean / 255.0);
    stats.std[ch] = static_cast<float>(std::sqrt(var) / 255.0);
  }
  return stats;
}

}  // namespace sparq::data
