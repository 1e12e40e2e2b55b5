#include "data/mlm_loader.h"

#include <algorithm>

#include "core/rng.h"

namespace sparq::data {

Result<MlmLoader> MlmLoader::create(std::shared_ptr<const TokenSource> source,
                                    const MlmLoaderConfig& config) {
  if (!source) return Status::error("MLM loader needs a token source");
  if (config.max_len < 3)
    return Status::error("max_len must be at least 3, got {}", config.max_len);
  if (!(config.mask_prob >= 0 && config.mask_prob <= 1) || config.mask_token_prob < 0 ||
      config.random_token_prob < 0 || config.mask_token_prob + config.random_token_prob > 1) {
    return Status::error(
        "bad masking probabilities: mask_prob {} (in [0, 1]), mask {} + random {} (sum <= 1)",
        config.mask_prob, config.mask_token_prob, config.random_token_prob);
  }
  const std::uint32_t vocab = source->vocab_size();
  for (const auto& [name, id] : {std::pair{"[CLS]", config.cls_id},
                                 {"[SEP]", config.sep_id},
                                 {"[MASK]", config.mask_id},
                                 {"[PAD]", config.pad_id}}) {
    if (id >= vocab) {
      return Status::error("special token {} (id {}) is outside the vocabulary ({} ids)", name, id,
                           vocab);
    }
  }
  // Index the sequences: documents end at [SEP]; long documents are cut into pieces.
  const std::uint64_t piece_max = static_cast<std::uint64_t>(config.max_len) - 2;
  std::vector<std::uint64_t> starts;
  std::vector<std::uint32_t> lengths;
  std::vector<std::uint32_t> chunk(1 << 16);
  std::uint64_t doc_start = 0;
  const auto add_document = [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t p = begin; p < end; p += piece_max) {
      starts.push_back(p);
      lengths.push_back(static_cast<std::uint32_t>(std::min(piece_max, end - p)));
    }
  };
  for (std::uint64_t base = 0; base < source->size(); base += chunk.size()) {
    const std::uint64_t n = std::min<std::uint64_t>(chunk.size(), source->size() - base);
    source->read(base, n, chunk.data());
    for (std::uint64_t i = 0; i < n; ++i) {
      if (chunk[i] != config.sep_id) continue;
      add_document(doc_start, base + i);
      doc_start = base + i + 1;
    }
  }
  add_document(doc_start, source->size());
  auto sampler = EpochSampler::create(starts.size(), config.sampler);
  if (!sampler.is_ok()) {
    return sampler.status().with_context(
        fmt::format("MLM loader over {} tokens ({} sequences)", source->size(), starts.size()));
  }
  return MlmLoader(std::move(source), config, std::move(sampler).value(), std::move(starts),
                   std::move(lengths));
}

MlmLoader::MlmLoader(std::shared_ptr<const TokenSource> source, MlmLoaderConfig config,
                     EpochSampler sampler, std::vector<std::uint64_t> starts,
                     std::vector<std::uint32_t> lengths)
    : source_(std::move(source)),
      config_(config),
      sampler_(std::move(sampler)),
      starts_(std::move(starts)),
      lengths_(std::move(lengths)) {
  const std::int64_t b = config_.sampler.micro_batch, l = config_.max_len;
  const std::size_t one = static_cast<std::size_t>(b * l) * sizeof(std::int32_t);
  buffer_ = Buffer::host(4 * one);
  batch_.input_ids = buffer_.view(DType::kI32, Shape{b, l}, 0);
  batch_.token_type_ids = buffer_.view(DType::kI32, Shape{b, l}, one);
  batch_.attention_mask = buffer_.view(DType::kI32, Shape{b, l}, 2 * one);
  batch_.labels = buffer_.view(DType::kI32, Shape{b, l}, 3 * one);
  piece_.resize(static_cast<std::size_t>(l));
}

const MlmBatch& MlmLoader::next() {
  const std::uint64_t epoch = sampler_.state().epoch;
  sampler_.next(&batch_.sequences);
  const std::size_t l = static_cast<std::size_t>(config_.max_len);
  auto* ids = batch_.input_ids.data<std::int32_t>();
  auto* types = batch_.token_type_ids.data<std::int32_t>();
  auto* attn = batch_.attention_mask.data<std::int32_t>();
  auto* labels = batch_.labels.data<std::int32_t>();
  const std::uint64_t seed = config_.fixed_masks ? kEvalMaskSeed : config_.sampler.seed;
  const std::uint64_t stream = config_.fixed_masks ? data_stream(DataStream::kEvalMask, 0)
                                                   : data_stream(DataStream::kMask, epoch);
  const std::uint64_t vocab = source_->vocab_size();
  const auto threshold = [](float p) {
    return static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0);
  };
  const std::uint64_t choose = threshold(config_.mask_prob);
  const std::uint64_t as_mask = threshold(config_.mask_token_prob);
  const std::uint64_t as_random = threshold(config_.mask_token_prob + config_.random_token_prob);

  for (std::size_t row = 0; row < batch_.sequences.size(); ++row) {
    // Evaluation's padding (sampler.h): sequence 0's tokens, so that attention sees a real
    // sequence, and every label ignored below.
    const bool padding = batch_.sequences[row] == kPaddingItem;
    const std::uint64_t seq = padding ? 0 : batch_.sequences[row];
    const std::size_t n = lengths_[seq];
    source_->read(starts_[seq], n, piece_.data());
    std::int32_t* r_ids = ids + row * l;
    std::int32_t* r_labels = labels + row * l;
    std::fill_n(r_ids, l, static_cast<std::int32_t>(config_.pad_id));
    std::fill_n(r_labels, l, kIgnoreLabel);
    std::fill_n(types + row * l, l, 0);
    std::fill_n(attn + row * l, l, 0);
    std::fill_n(attn + row * l, n + 2, 1);
    r_ids[0] = static_cast<std::int32_t>(config_.cls_id);
    r_ids[n + 1] = static_cast<std::int32_t>(config_.sep_id);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t pos = i + 1;
      const auto original = static_cast<std::int32_t>(piece_[i]);
      r_ids[pos] = original;
      const auto draw = philox4x32(seed, stream, seq * l + pos);
      if (draw[0] >= choose) continue;
      r_labels[pos] = original;
      if (draw[1] < as_mask) {
        r_ids[pos] = static_cast<std::int32_t>(config_.mask_id);
      } else if (draw[1] < as_random) {
        // Multiply-shift maps 32 random bits to [0, vocab) (bias below vocab / 2^32).
        r_ids[pos] = static_cast<std::int32_t>((static_cast<std::uint64_t>(draw[2]) * vocab) >> 32);
      }
    }
    if (padding) std::fill_n(r_labels, l, kIgnoreLabel);
  }
  return batch_;
}

}  // namespace sparq::data
