#include "data/lm_loader.h"

namespace sparq::data {

Result<LmLoader> LmLoader::create(std::shared_ptr<const TokenSource> source,
                                  const LmLoaderConfig& config) {
  if (!source) return Status::error("LM loader needs a token source");
  if (config.seq_len <= 0) return Status::error("seq_len must be positive, got {}", config.seq_len);
  const std::uint64_t windows = source->size() > 0 ? (source->size() - 1) / config.seq_len : 0;
  auto sampler = EpochSampler::create(windows, config.sampler);
  if (!sampler.is_ok()) {
    return sampler.status().with_context(
        fmt::format("LM loader over {} tokens ({} windows of {}+1 tokens)", source->size(), windows,
                    config.seq_len));
  }
  return LmLoader(std::move(source), config, std::move(sampler).value());
}

LmLoader::LmLoader(std::shared_ptr<const TokenSource> source, LmLoaderConfig config,
                   EpochSampler sampler)
    : source_(std::move(source)), config_(config), sampler_(std::move(sampler)) {
  const std::int64_t b = config_.sampler.micro_batch, t = config_.seq_len;
  input_buf_ = Buffer::host(static_cast<std::size_t>(b * t) * sizeof(std::int32_t));
  target_buf_ = Buffer::host(static_cast<std::size_t>(b * t) * sizeof(std::int32_t));
  batch_.inputs = input_buf_.view(DType::kI32, Shape{b, t});
  batch_.targets = target_buf_.view(DType::kI32, Shape{b, t});
  window_.resize(static_cast<std::size_t>(t) + 1);
}

const LmBatch& LmLoader::next() {
  sampler_.next(&batch_.windows);
  const std::size_t t = static_cast<std::size_t>(config_.seq_len);
  auto* in = batch_.inputs.data<std::int32_t>();
  auto* tg = batch_.targets.data<std::int32_t>();
  for (std::size_t row = 0; row < batch_.windows.size(); ++row) {
    // Evaluation's padding (sampler.h): window 0's inputs, every target ignored.
    const bool padding = batch_.windows[row] == kPaddingItem;
    source_->read(padding ? 0 : batch_.windows[row] * t, t + 1, window_.data());
    for (std::size_t i = 0; i < t; ++i) {
      in[row * t + i] = static_cast<std::int32_t>(window_[i]);
      tg[row * t + i] = padding ? kIgnoreLabel : static_cast<std::int32_t>(window_[i + 1]);
    }
  }
  return batch_;
}

}  // namespace sparq::data
