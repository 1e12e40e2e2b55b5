// Random inputs for model tests that do not need golden values.
#pragma once

#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "core/rng.h"
#include "models/model.h"

namespace sparq::testing {

// Owns the buffers behind a Batch of random, valid inputs for `config` at shape [b, t].
struct RandomBatch {
  Buffer tokens, targets, mask, types, nsp, images, labels;
  Batch batch;

  RandomBatch(const ModelConfig& config, std::int64_t b, std::int64_t t, std::uint64_t seed) {
    Rng rng(seed, 7);
    if (config.is_language_model()) {
      tokens = Buffer::host(b * t * 4);
      targets = Buffer::host(b * t * 4);
      mask = Buffer::host(b * t);
      types = Buffer::host(b * t * 4);
      nsp = Buffer::host(b * 4);
      for (std::int64_t i = 0; i < b * t; ++i) {
        const std::int64_t row = i / t, pos = i % t;
        tokens.as<std::int32_t>()[i] = static_cast<std::int32_t>(rng.below(config.vocab_size));
        targets.as<std::int32_t>()[i] = static_cast<std::int32_t>(rng.below(config.vocab_size));
        // Row r keeps its first t - r tokens (at least one): every row but the first is padded.
        mask.as<std::uint8_t>()[i] = pos < std::max<std::int64_t>(1, t - row) ? 1 : 0;
        types.as<std::int32_t>()[i] = pos >= t / 2 ? 1 : 0;
      }
      for (std::int64_t r = 0; r < b; ++r) nsp.as<std::int32_t>()[r] = static_cast<std::int32_t>(r % 2);
      batch.tokens = Tensor(tokens.data(), DType::kI32, {b, t});
      batch.targets = Tensor(targets.data(), DType::kI32, {b, t});
      if (config.arch == ModelArch::kBert) {
        batch.attention_mask = Tensor(mask.data(), DType::kU8, {b, t});
        batch.token_types = Tensor(types.data(), DType::kI32, {b, t});
        if (config.nsp) batch.nsp_labels = Tensor(nsp.data(), DType::kI32, {b});
      }
    } else {
      const std::int64_t n = b * config.in_channels * config.image_size * config.image_size;
      images = Buffer::host(n * 4);
      labels = Buffer::host(b * 4);
      fill_normal(images.as<float>(), n, 0.0f, 1.0f, seed, 11);
      for (std::int64_t r = 0; r < b; ++r) {
        labels.as<std::int32_t>()[r] = static_cast<std::int32_t>(rng.below(config.num_classes));
      }
      batch.images = Tensor(images.data(), DType::kF32,
                            {b, config.in_channels, config.image_size, config.image_size});
      batch.labels = Tensor(labels.data(), DType::kI32, {b});
    }
  }
};

// A model of `spec` for shape `shape`, declared into, allocated in and bound to `store`.
inline std::unique_ptr<Model> bound_model(const std::string& spec, RunShape shape,
                                          ParamStore& store, std::uint64_t seed = 1,
                                          const ParamStore::PlacementPredicate& place_last = {}) {
  auto model = make_model(parse_model_spec(spec).value(), shape).value();
  model->declare(store);
  store.allocate(ExecContext::cpu(), place_last);
  store.initialize(seed);
  model->bind(store);
  return model;
}

}  // namespace sparq::testing
