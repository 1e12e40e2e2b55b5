// Model::score on hand-written logits: after a forward, the test overwrites the model's
// logits buffer (a view into its arena) and the targets, so every hit and miss is known.
// Language models keep logits only with fused_head=0; the fused head's score is checked
// against theirs.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "models/model_test_util.h"

namespace sparq {
namespace {

// A model of `spec` after one eval-mode forward on random inputs of shape [b, t].
struct Forwarded {
  ParamStore store;
  std::unique_ptr<Model> model;
  std::unique_ptr<testing::RandomBatch> data;

  Forwarded(const std::string& spec, std::int64_t b, std::int64_t t) {
    model = testing::bound_model(spec, {b, t}, store);
    data = std::make_unique<testing::RandomBatch>(model->config(), b, t, 4);
    model->set_training(false);
    model->forward(data->batch);
  }
  // What score() compares with: LM targets or VGG labels, editable after the forward.
  std::int32_t* targets() const {
    return (model->config().is_language_model() ? data->targets : data->labels).as<std::int32_t>();
  }
  // Sets logits row r to zeros with the given (column, value) peaks.
  void set_row(std::int64_t r, const std::vector<std::pair<std::int64_t, float>>& peaks) const {
    const Tensor z = model->logits();
    float* row = z.data<float>() + r * z.dim(-1);
    std::fill(row, row + z.dim(-1), 0.0f);
    for (const auto& [col, value] : peaks) row[col] = value;
  }
  void expect_score(std::int64_t count, std::int64_t correct) const {
    const Model::Score s = model->score(data->batch);
    EXPECT_EQ(s.count, count);
    EXPECT_EQ(s.correct, correct);
  }
};

TEST(ModelScore, LanguageModelSkipsIgnoredTargetsAndPaddedColumns) {
  // 1000 real tokens in a table padded to 1024 columns.
  Forwarded f("gpt2-tiny vocab_size=1000 fused_head=0", 2, 3);
  ASSERT_EQ(f.model->config().padded_vocab(), 1024);
  std::int32_t* y = f.targets();
  f.set_row(0, {{5, 2.0f}});
  y[0] = 5;  // hit
  f.set_row(1, {{7, 2.0f}});
  y[1] = 3;  // miss
  f.set_row(2, {{9, 2.0f}});
  y[2] = kIgnoreIndex;  // not counted, although the argmax would miss
  f.set_row(3, {{1000, 100.0f}, {2, 1.0f}});
  y[3] = 2;  // hit: the padded column 1000 is larger but never predicted
  f.set_row(4, {{1, 3.0f}, {4, 3.0f}});
  y[4] = 1;  // hit: a tie goes to the lowest index
  f.set_row(5, {{1, 3.0f}, {4, 3.0f}});
  y[5] = 4;  // miss
  f.expect_score(5, 3);
}

TEST(ModelScore, BertScoresItsMaskedTargets) {
  Forwarded f("bert-tiny nsp=1 fused_head=0", 1, 4);
  std::int32_t* y = f.targets();
  for (std::int64_t r = 0; r < 4; ++r) f.set_row(r, {{r + 10, 1.0f}});
  y[0] = 10;  // hit
  y[1] = y[2] = kIgnoreIndex;
  y[3] = 0;  // miss
  f.expect_score(2, 1);
}

TEST(ModelScore, VggCountsEveryImage) {
  Forwarded f("vgg-tiny", 3, 0);
  std::int32_t* y = f.targets();
  f.set_row(0, {{3, 1.0f}});
  y[0] = 3;  // hit
  f.set_row(1, {{0, -1.0f}});
  y[1] = 1;  // hit: every other class is 0 > -1, and class 1 is the first of them
  f.set_row(2, {{2, 5.0f}});
  y[2] = 0;  // miss
  f.expect_score(3, 2);
}

// Note [Prediction rule] (layers/prediction_rule.h): a NaN is never the prediction, where
// std::max_element, which the host scoring used, lets a leading NaN win.
TEST(ModelScore, NanIsNeverPredicted) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const bool lm : {true, false}) {
    // Two rows each: one sequence of two tokens, or two images.
    Forwarded f(lm ? "gpt2-tiny vocab_size=1000 fused_head=0" : "vgg-tiny", lm ? 1 : 2, lm ? 2 : 0);
    std::int32_t* y = f.targets();
    f.set_row(0, {{0, nan}, {3, 2.0f}});
    y[0] = 3;  // hit
    const Tensor z = f.model->logits();
    std::fill(z.data<float>() + z.dim(-1), z.data<float>() + 2 * z.dim(-1), nan);
    y[1] = 0;  // hit: a row without a number predicts 0
    f.expect_score(2, 2);
  }
}

TEST(ModelScore, NeedsAForwardNotConsumedByBackward) {
  Forwarded f("gpt2-tiny", 1, 4);
  f.model->backward();
  EXPECT_DEATH(f.model->score(f.data->batch), "gpt2-tiny: score\\(\\) needs a forward\\(\\)");
}

TEST(ModelScore, TargetsMustMatchTheLastForward) {
  Forwarded f("gpt2-tiny fused_head=0", 2, 4);
  testing::RandomBatch shorter(f.model->config(), 1, 4, 4);
  EXPECT_DEATH(f.model->score(shorter.batch), "gpt2-tiny fused_head=0: batch.targets is .*, expected");
  Forwarded fused("gpt2-tiny", 2, 4);
  EXPECT_DEATH(fused.model->score(shorter.batch), "gpt2-tiny: score\\(\\) needs the batch of the last");
}

// The fused head's predictions (its argmax over the real columns) score like the logits of
// the unfused model with the same weights and batch. Half of the targets are set to the
// unfused argmax, so both hits and misses occur.
TEST(ModelScore, FusedHeadScoresLikeTheLogits) {
  for (const std::string spec : {"gpt2-tiny vocab_size=1000", "bert-tiny nsp=1"}) {
    Forwarded plain(spec + " fused_head=0", 2, 6);
    Forwarded fused(spec, 2, 6);
    ASSERT_FALSE(plain.model->fused_head());
    ASSERT_TRUE(fused.model->fused_head());
    std::copy(plain.store.params(), plain.store.params() + plain.store.flat_numel(),
              fused.store.params());
    const Tensor z = plain.model->logits();
    const std::int64_t real = plain.model->config().vocab_size, width = z.dim(-1);
    std::int32_t* y = plain.targets();
    for (std::int64_t r = 0; r < 12; r += 2) {
      if (y[r] == kIgnoreIndex) continue;
      const float* row = z.data<float>() + r * width;
      y[r] = static_cast<std::int32_t>(std::max_element(row, row + real) - row);
    }
    std::copy(y, y + 12, fused.targets());
    fused.model->forward(fused.data->batch);  // again, with the new weights and targets
    const Model::Score a = plain.model->score(plain.data->batch);
    const Model::Score b = fused.model->score(fused.data->batch);
    EXPECT_EQ(a.count, b.count) << spec;
    EXPECT_EQ(a.correct, b.correct) << spec;
    EXPECT_GT(a.correct, 0) << spec;
  }
}

}  // namespace
}  // namespace sparq
