// Evaluation's MLM masks are fixed (mlm_loader.h): the same masked positions and replacement
// ids whatever the training seed and the epoch, and not training's own masks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/mlm_loader.h"

namespace sparq::data {
namespace {

std::shared_ptr<VectorTokenSource> documents() {
  std::vector<std::uint32_t> t(4000);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = (i % 97 == 96) ? 1 : 5 + static_cast<std::uint32_t>(i % 50);
  return std::make_shared<VectorTokenSource>(t, 60);
}

// The input ids and labels of a whole pass, in order: 0 [PAD], 1 [SEP], 2 [CLS], 3 [MASK].
std::vector<std::int32_t> one_pass(const std::shared_ptr<VectorTokenSource>& source,
                                   std::uint64_t seed, bool evaluation, int passes = 1) {
  MlmLoaderConfig c;
  c.max_len = 32;
  c.pad_id = 0, c.sep_id = 1, c.cls_id = 2, c.mask_id = 3;
  c.sampler.micro_batch = 4, c.sampler.rank = 0, c.sampler.world_size = 1;
  c.sampler.seed = seed;
  c.sampler.shuffle = false;  // the same sequences in the same order, so only masks differ
  c.sampler.pad_last_batch = evaluation;
  c.fixed_masks = evaluation;
  auto loader = MlmLoader::create(source, c).value();
  std::vector<std::int32_t> seen;  // the last pass's
  for (int pass = 0; pass < passes; ++pass) {
    seen.clear();
    for (std::uint64_t step = 0; step < loader.steps_per_epoch(); ++step) {
      const MlmBatch& b = loader.next();
      const auto n = static_cast<std::size_t>(b.input_ids.numel());
      seen.insert(seen.end(), b.input_ids.data<std::int32_t>(),
                  b.input_ids.data<std::int32_t>() + n);
      seen.insert(seen.end(), b.labels.data<std::int32_t>(), b.labels.data<std::int32_t>() + n);
    }
  }
  return seen;
}

// Drawn from the training seed, they differed between runs that differed only in seed, and
// with no data.eval they were training's epoch-0 masks (review, 2026-12-07).
TEST(MlmLoader, EvaluationMasksAreTheSameForEverySeedAndEpoch) {
  const auto source = documents();
  const std::vector<std::int32_t> eval_1 = one_pass(source, 1, true);
  EXPECT_EQ(one_pass(source, 2, true), eval_1);
  EXPECT_EQ(one_pass(source, 1, true, /*passes=*/3), eval_1);
  // Training redraws with its seed and epoch, and never uses evaluation's masks.
  const std::vector<std::int32_t> train_1 = one_pass(source, 1, false);
  EXPECT_NE(one_pass(source, 2, false), train_1);
  EXPECT_NE(one_pass(source, 1, false, /*passes=*/2), train_1);
  // Training's epoch 0 against evaluation, over the steps both take (evaluation pads a last
  // batch that training drops).
  const std::size_t common = std::min(train_1.size(), eval_1.size());
  ASSERT_GT(common, 0u);
  EXPECT_FALSE(std::equal(train_1.begin(), train_1.begin() + common, eval_1.begin()));
}

}  // namespace
}  // namespace sparq::data
