// Behaviour the golden files cannot show: initialisation, dropout and its step seed,
// train/eval switching, BatchNorm state, and batches smaller than the configured shape.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "models/bert.h"
#include "models/model.h"
#include "models/model_test_util.h"

namespace sparq {
namespace {

double stddev(const Tensor& t) {
  const float* p = t.data<float>();
  const auto n = static_cast<std::size_t>(t.numel());
  const double mean = ops::sum(p, n) / n;
  return std::sqrt(ops::sum_squares(p, n) / n - mean * mean);
}

TEST(ModelBehavior, Gpt2InitScalesResidualProjections) {
  ParamStore store;
  auto model = testing::bound_model("gpt2-tiny", {1, 8}, store, 5);
  const double scaled = 0.02 / std::sqrt(2.0 * 4);
  for (const auto& e : store.entries()) {
    const std::string& n = e.spec.name;
    const bool residual = n.ends_with("attn.proj.weight") || n.ends_with("mlp.proj.weight");
    if (n.ends_with(".bias")) {
      EXPECT_EQ(e.spec.init.kind, Init::Kind::kZeros) << n;
    } else if (n.find("ln_") != std::string::npos) {
      EXPECT_EQ(e.spec.init.kind, Init::Kind::kOnes) << n;
    } else {
      ASSERT_EQ(e.spec.init.kind, Init::Kind::kNormal) << n;
      EXPECT_NEAR(e.spec.init.a, residual ? scaled : 0.02, 1e-7) << n;
      EXPECT_NEAR(stddev(store.param(n)), residual ? scaled : 0.02, 0.1 * e.spec.init.a) << n;
    }
  }
}

TEST(ModelBehavior, VggUsesKaimingInit) {
  ParamStore store;
  auto model = testing::bound_model("vgg-tiny", {1, 0}, store, 5);
  EXPECT_EQ(store.entry("features.12.conv.weight").spec.init.kind, Init::Kind::kKaimingNormal);
  // fan_out = 32 * 3 * 3: std sqrt(2 / 288).
  EXPECT_NEAR(stddev(store.param("features.12.conv.weight")), std::sqrt(2.0 / 288), 0.01);
  EXPECT_EQ(store.entry("features.0.bn.weight").spec.init.kind, Init::Kind::kOnes);
  EXPECT_NEAR(stddev(store.param("classifier.weight")), 0.01, 0.002);
}

std::vector<float> grads_of(const ParamStore& store) {
  return std::vector<float>(store.grads(), store.grads() + store.flat_numel());
}

TEST(ModelBehavior, DropoutFollowsTheStepAndTheMode) {
  ParamStore store;
  auto model = testing::bound_model("bert-tiny dropout=0.2 attn_dropout=0.2", {2, 12}, store);
  testing::RandomBatch data(model->config(), 2, 12, 9);
  model->set_dropout_seed(42, 0);
  model->set_step(7);
  const float a = model->forward(data.batch);
  model->backward();
  const auto grads_a = grads_of(store);
  store.zero_grads();
  const float again = model->forward(data.batch);
  model->backward();
  EXPECT_EQ(a, again) << "the same step must draw the same masks";
  EXPECT_EQ(grads_of(store), grads_a);
  model->set_step(8);
  EXPECT_NE(model->forward(data.batch), a) << "another step must draw other masks";
  model->set_training(false);
  const float eval = model->forward(data.batch);
  model->set_step(9);
  EXPECT_EQ(model->forward(data.batch), eval) << "eval mode has no dropout";
  EXPECT_NE(eval, a);
}

// Note [Backward differentiates its forward] (models/model.h): a set_step() or
// set_training() between forward and backward does not change the gradient (the masks were
// redrawn or dropped in backward: gradients off by up to 0.25, review 2026-12-06); the
// step set last is the one the next forward uses.
TEST(ModelBehavior, BackwardUsesTheStepAndModeOfItsForward) {
  for (const char* spec :
       {"gpt2-tiny n_layer=1 n_embd=32 vocab_size=64 dropout=0.3 attn_dropout=0.3",
        "bert-tiny dropout=0.3 attn_dropout=0.3"}) {
    ParamStore store;
    auto model = testing::bound_model(spec, {2, 8}, store, 3);
    testing::RandomBatch data(model->config(), 2, 8, 5);
    model->set_step(11);
    model->forward_for_backward(data.batch);
    model->backward();
    const auto plain = grads_of(store);
    for (const bool switch_mode : {false, true}) {
      store.zero_grads();
      model->set_training(true);
      model->set_step(11);
      model->forward_for_backward(data.batch);
      if (switch_mode) {
        model->set_training(false);
      } else {
        model->set_step(12);
      }
      model->backward();
      EXPECT_EQ(grads_of(store), plain) << spec << (switch_mode ? ": eval mode" : ": step 12")
                                        << " set between forward and backward";
      EXPECT_EQ(model->training(), !switch_mode) << spec << ": backward kept the mode set";
      EXPECT_EQ(model->dropout_step().step, switch_mode ? 11u : 12u)
          << spec << ": backward kept the step set";
    }
  }
}

// With dropout on, backward must differentiate the masked forward: check the gradient of
// the parameters it is largest for against central differences of the loss.
TEST(ModelBehavior, GradientWithDropoutMatchesFiniteDifferences) {
  ParamStore store;
  auto model = testing::bound_model("gpt2-tiny n_layer=1 n_embd=32 vocab_size=64 dropout=0.3 "
                                    "attn_dropout=0.3",
                                    {2, 8}, store, 3);
  testing::RandomBatch data(model->config(), 2, 8, 5);
  model->set_step(11);
  model->forward(data.batch);
  model->backward();
  for (const char* name : {"h.0.mlp.fc.weight", "h.0.attn.qkv.weight", "wpe.weight"}) {
    const Tensor g = store.grad(name), p = store.param(name);
    std::int64_t k = 0;
    for (std::int64_t i = 0; i < g.numel(); ++i) {
      if (std::fabs(g.data<float>()[i]) > std::fabs(g.data<float>()[k])) k = i;
    }
    const float saved = p.data<float>()[k], h = 3e-3f;
    p.data<float>()[k] = saved + h;
    const double up = model->forward(data.batch);
    p.data<float>()[k] = saved - h;
    const double down = model->forward(data.batch);
    p.data<float>()[k] = saved;
    const double numeric = (up - down) / (2.0 * h);
    EXPECT_NEAR(g.data<float>()[k], numeric, 0.03 * std::fabs(numeric) + 1e-4) << name << "[" << k << "]";
  }
}

TEST(ModelBehavior, VggRunningStatisticsMoveOnlyInTraining) {
  ParamStore store;
  auto model = testing::bound_model("vgg-tiny", {4, 0}, store);
  testing::RandomBatch data(model->config(), 4, 0, 2);
  const auto state = model->state();
  ASSERT_EQ(state.size(), 26u);  // 13 BatchNorms x (mean, var)
  EXPECT_EQ(state.front().name, "features.0.bn.running_mean");
  const auto snapshot = [&] { return std::vector<float>(state[0].tensor.data<float>(),
                                                        state[0].tensor.data<float>() + 4); };
  const auto initial = snapshot();
  model->set_training(false);
  const float eval_loss = model->forward(data.batch);
  EXPECT_EQ(snapshot(), initial);
  model->set_training(true);
  const float train_loss = model->forward(data.batch);
  EXPECT_NE(snapshot(), initial);
  EXPECT_NE(train_loss, eval_loss);
}

// A short batch in a model sized for more must equal a model sized exactly for it.
TEST(ModelBehavior, SmallerBatchMatchesAnExactlySizedModel) {
  for (const auto& [spec, big, small] :
       {std::tuple{"gpt2-tiny n_layer=2", RunShape{3, 24}, RunShape{2, 10}},
        std::tuple{"bert-tiny nsp=1 dropout=0 attn_dropout=0", RunShape{3, 16}, RunShape{2, 9}},
        std::tuple{"vgg-tiny", RunShape{4, 0}, RunShape{2, 0}}}) {
    SCOPED_TRACE(spec);
    ParamStore store_big, store_small;
    auto a = testing::bound_model(spec, big, store_big, 8);
    auto b = testing::bound_model(spec, small, store_small, 8);
    testing::RandomBatch data(a->config(), small.micro_batch, small.seq_len, 6);
    EXPECT_EQ(a->forward(data.batch), b->forward(data.batch));
    a->backward();
    b->backward();
    EXPECT_EQ(grads_of(store_big), grads_of(store_small));
  }
}

// Evaluation scores the MLM targets; BERT's NSP term is trained on but reported apart
// (Score::unscored_loss), so loss - unscored_loss does not move when only the NSP head does.
TEST(ModelBehavior, BertNspLossIsKeptApartFromTheScoredLoss) {
  ParamStore store;
  auto model = testing::bound_model("bert-tiny nsp=1 dropout=0 attn_dropout=0", {2, 8}, store);
  testing::RandomBatch data(model->config(), 2, 8, 3);
  const float loss = model->forward(data.batch);
  const Model::Score before = model->score(data.batch);
  EXPECT_GT(before.unscored_loss, 0.0f);
  EXPECT_LT(before.unscored_loss, loss);
  float* nsp_bias = store.param("nsp.bias").data<float>();
  nsp_bias[0] += 3.0f;  // the NSP head now favours class 0 strongly
  const float moved = model->forward(data.batch);
  const Model::Score after = model->score(data.batch);
  EXPECT_NE(moved, loss);
  // Equal to the rounding of (mlm + nsp) - nsp in float.
  EXPECT_NEAR(moved - after.unscored_loss, loss - before.unscored_loss, 1e-5f * loss);
  EXPECT_EQ(after.count, before.count);

  ParamStore plain_store;
  auto plain = testing::bound_model("bert-tiny", {2, 8}, plain_store);
  testing::RandomBatch plain_data(plain->config(), 2, 8, 3);
  plain->forward(plain_data.batch);
  EXPECT_EQ(plain->score(plain_data.batch).unscored_loss, 0.0f);
}

// Note [Token-weighted micro-batches] (train/data_parallel.h): the target scale seeds BERT's
// MLM gradient only, on either head and whether the fused head takes its gradient in the
// forward or in backward; the heads that only MLM reaches scale with it, the NSP head and
// pooler do not move. GPT-2, whose every target counts, ignores it.
TEST(ModelBehavior, TargetGradScaleSeedsOnlyTheMaskedLmGradient) {
  for (const char* head : {"fused_head=1", "fused_head=0"}) {
    for (const bool eager : {true, false}) {
      SCOPED_TRACE(std::string(head) + (eager ? ", forward_for_backward" : ", forward"));
      ParamStore store;
      auto model = testing::bound_model(
          std::string("bert-tiny nsp=1 dropout=0 attn_dropout=0 ") + head, {2, 8}, store);
      ASSERT_TRUE(model->weighs_counted_targets());
      testing::RandomBatch data(model->config(), 2, 8, 4);
      EXPECT_EQ(model->counted_target_count(data.batch), 16);
      {  // a count known already (a staged batch's, BatchStager) is taken as it is
        Batch counted = data.batch;
        counted.counted_targets = 5;
        EXPECT_EQ(model->counted_target_count(counted), 5);
      }
      const auto grads_at = [&](float scale) {
        model->set_target_grad_scale(scale);
        if (eager) {
          model->forward_for_backward(data.batch);
        } else {
          model->forward(data.batch);
        }
        model->backward();
        std::vector<float> g = grads_of(store);
        store.zero_grads();
        return g;
      };
      const std::vector<float> one = grads_at(1.0f), three = grads_at(3.0f);
      for (const char* name : {"mlm.decoder.bias", "mlm.dense.weight", "mlm.ln.weight"}) {
        const ParamRange r = store.entry(name).range();
        double d2 = 0, w2 = 0;  // a tensor's norms: elements that are sums cancel in rounding
        for (std::int64_t i = r.offset; i < r.offset + r.count; ++i) {
          d2 += std::pow(three[i] - 3.0 * one[i], 2), w2 += std::pow(3.0 * one[i], 2);
        }
        EXPECT_LT(std::sqrt(d2 / w2), 1e-5) << name;
      }
      for (const char* name : {"nsp.weight", "pooler.weight"}) {
        const ParamRange r = store.entry(name).range();
        for (std::int64_t i = r.offset; i < r.offset + r.count; ++i) {
          ASSERT_EQ(three[i], one[i]) << name;
        }
      }
    }
  }
  ParamStore store;
  auto gpt2 = testing::bound_model("gpt2-tiny n_layer=1", {2, 8}, store);
  EXPECT_FALSE(gpt2->weighs_counted_targets());
  testing::RandomBatch data(gpt2->config(), 2, 8, 4);
  std::vector<float> grads[2];
  for (const float scale : {1.0f, 3.0f}) {
    gpt2->set_target_grad_scale(scale);
    gpt2->forward_for_backward(data.batch);
    gpt2->backward();
    grads[scale == 1.0f ? 0 : 1] = grads_of(store);
    store.zero_grads();
  }
  EXPECT_EQ(grads[0], grads[1]);
}

TEST(ModelBehavior, BadBatchesAreRejectedWithTheField) {
  ParamStore store;
  auto model = testing::bound_model("bert-tiny nsp=1", {2, 8}, store);
  testing::RandomBatch data(model->config(), 2, 8, 1);
  Batch no_nsp = data.batch;
  no_nsp.nsp_labels = Tensor();
  EXPECT_DEATH(model->forward(no_nsp), "batch.nsp_labels is missing");
  testing::RandomBatch long_batch(model->config(), 2, 9, 1);
  EXPECT_DEATH(model->forward(long_batch.batch), "must be \\[B <= 2, T <= 8\\]");
}

}  // namespace
}  // namespace sparq
