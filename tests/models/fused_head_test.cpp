// The fused CPU head inside the language models (model key fused_head, Note [Eager head
// gradient] in models/model.h): its two entry paths agree bit for bit, it agrees with the
// materialized head up to rounding, and it keeps no logits; its slot is planned per device
// (Note [Head slot], models/lm_head_slot.h). The materialized head and VGG take their loss's
// gradient in forward_for_backward() too: the same bits, one cross-entropy pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/profile.h"
#include "models/bert.h"
#include "models/lm_head_slot.h"
#include "models/model.h"
#include "models/model_test_util.h"

namespace sparq {
namespace {

struct Pass {
  float loss = 0;
  std::vector<float> grads;
};

// One training step's forward (plain or forward_for_backward) and backward from seed-1
// weights on a fixed random batch; BERT keeps its dropout, at the same step both times.
Pass train_pass(const std::string& spec, bool eager) {
  ParamStore store;
  auto model = testing::bound_model(spec, {2, 12}, store);
  testing::RandomBatch data(model->config(), 2, 12, 7);
  model->set_training(true);
  model->set_step(3);
  store.zero_grads();
  Pass p;
  p.loss = eager ? model->forward_for_backward(data.batch) : model->forward(data.batch);
  model->backward();
  p.grads.assign(store.grads(), store.grads() + store.flat_numel());
  return p;
}

const char* const kSpecs[] = {"gpt2-tiny vocab_size=1000", "bert-tiny nsp=1"};

TEST(FusedHead, ForwardForBackwardEqualsForwardThenBackward) {
  for (const std::string spec : kSpecs) {
    const Pass eager = train_pass(spec, true), plain = train_pass(spec, false);
    EXPECT_EQ(eager.loss, plain.loss) << spec;
    ASSERT_EQ(eager.grads.size(), plain.grads.size());
    EXPECT_EQ(std::memcmp(eager.grads.data(), plain.grads.data(), eager.grads.size() * 4), 0)
        << spec;
  }
}

// Cross-entropy passes of one step, by entry: forward() (loss only) and forward_backward().
struct LossCalls {
  std::int64_t loss_only = 0, with_gradient = 0;
};
LossCalls loss_calls_of_one_step(const std::string& spec, bool eager) {
  profile::set_enabled(true);
  train_pass(spec, eager);
  profile::set_enabled(false);
  LossCalls c;
  for (const profile::Row& row : profile::rows()) {
    if (row.name == "cross_entropy.forward") c.loss_only = row.calls;
    if (row.name == "cross_entropy.backward") c.with_gradient = row.calls;
  }
  profile::reset();
  return c;
}

// Note [Eager head gradient]: the materialized head (BERT's NSP loss as well) and VGG give
// forward_for_backward() + backward() the bits of forward() + backward(), with one
// cross-entropy pass per loss instead of two (a loss-only pass, then one with the gradient).
TEST(EagerLossGradient, MaterializedHeadsAndVggRunTheirLossOnce) {
  struct Case {
    const char* spec;
    std::int64_t losses;  // cross-entropy layers in the model
  };
  for (const Case c :
       {Case{"gpt2-tiny vocab_size=1000 fused_head=0", 1}, Case{"bert-tiny nsp=1 fused_head=0", 2},
        Case{"bert-tiny nsp=1", 1}, Case{"vgg-tiny", 1}}) {
    const Pass eager = train_pass(c.spec, true), plain = train_pass(c.spec, false);
    EXPECT_EQ(eager.loss, plain.loss) << c.spec;
    ASSERT_EQ(eager.grads.size(), plain.grads.size());
    EXPECT_EQ(std::memcmp(eager.grads.data(), plain.grads.data(), eager.grads.size() * 4), 0)
        << c.spec;
    const LossCalls once = loss_calls_of_one_step(c.spec, true);
    EXPECT_EQ(once.loss_only, 0) << c.spec;
    EXPECT_EQ(once.with_gradient, c.losses) << c.spec;
    const LossCalls twice = loss_calls_of_one_step(c.spec, false);
    EXPECT_EQ(twice.loss_only, c.losses) << c.spec;
    EXPECT_EQ(twice.with_gradient, c.losses) << c.spec;
  }
}

// After forward_for_backward() a language model's logits buffers hold their gradient: reading
// them is refused with the reason until a plain forward(); VGG keeps its logits.
TEST(EagerLossGradient, LogitsHoldingTheirGradientAreRefused) {
  ParamStore store;
  auto bert = testing::bound_model("bert-tiny nsp=1 fused_head=0", {1, 8}, store);
  testing::RandomBatch data(bert->config(), 1, 8, 7);
  bert->forward_for_backward(data.batch);
  EXPECT_DEATH(bert->logits(),
               "bert-tiny nsp=1 fused_head=0: after forward_for_backward\\(\\) "
               "the logits buffer holds their gradient");
  EXPECT_DEATH(bert->score(data.batch), "the logits buffer holds their gradient");
  EXPECT_DEATH(dynamic_cast<Bert&>(*bert).nsp_logits(),
               "the NSP logits buffer holds their gradient");
  bert->backward();
  bert->forward(data.batch);
  EXPECT_EQ(bert->logits().dim(0), 1);
  EXPECT_EQ(dynamic_cast<Bert&>(*bert).nsp_logits().dim(0), 1);
  // A plain forward() after the eager one takes the buffers back: readable, and its
  // backward() gives a fresh forward() + backward()'s gradient.
  const auto gradient_after = [&](bool eager_first) {
    store.zero_grads();
    if (eager_first) bert->forward_for_backward(data.batch);
    bert->forward(data.batch);
    EXPECT_EQ(bert->logits().dim(0), 1);
    EXPECT_EQ(dynamic_cast<Bert&>(*bert).nsp_logits().dim(0), 1);
    bert->backward();
    return std::vector<float>(store.grads(), store.grads() + store.flat_numel());
  };
  const std::vector<float> taken_back = gradient_after(true);
  const std::vector<float> fresh = gradient_after(false);
  EXPECT_EQ(std::memcmp(taken_back.data(), fresh.data(), fresh.size() * 4), 0);

  ParamStore vgg_store;
  auto vgg = testing::bound_model("vgg-tiny", {2, 0}, vgg_store);
  testing::RandomBatch images(vgg->config(), 2, 0, 7);
  vgg->forward_for_backward(images.batch);
  EXPECT_EQ(vgg->score(images.batch).count, 2);
  vgg->backward();
}

TEST(FusedHead, AgreesWithTheMaterializedHead) {
  for (const std::string spec : kSpecs) {
    const Pass fused = train_pass(spec, true), plain = train_pass(spec + " fused_head=0", true);
    EXPECT_NEAR(fused.loss, plain.loss, 1e-5 * std::fabs(plain.loss)) << spec;
    float largest = 0;
    for (const float g : plain.grads) largest = std::max(largest, std::fabs(g));
    for (std::size_t i = 0; i < plain.grads.size(); ++i) {
      ASSERT_NEAR(fused.grads[i], plain.grads[i], 1e-4 * (std::fabs(plain.grads[i]) + largest))
          << spec << " gradient element " << i;
    }
  }
}

TEST(FusedHead, RefusesASecondEagerForwardAndKeepsNoLogits) {
  ParamStore store;
  auto model = testing::bound_model("gpt2-tiny", {1, 8}, store);
  testing::RandomBatch data(model->config(), 1, 8, 7);
  model->forward_for_backward(data.batch);
  EXPECT_DEATH(model->forward_for_backward(data.batch),
               "gpt2-tiny: a second forward_for_backward\\(\\) before backward\\(\\)");
  EXPECT_DEATH(model->logits(), "gpt2-tiny: the fused head keeps no logits");
  // A plain forward() in between would pair this batch's head gradient with its batch.
  EXPECT_DEATH(model->forward(data.batch),
               "gpt2-tiny: forward\\(\\) between forward_for_backward\\(\\) and backward\\(\\)");
  model->backward();
  model->forward(data.batch);               // a plain forward after backward is fine
  model->forward_for_backward(data.batch);  // allowed again after backward
  model->backward();
}

// The head's workspace is O(chunk x V), not O(B x T x V): from B=8 to B=32 the fused model's
// activations grow by far less than the logits do, and at B=32 most of the logits' memory is
// saved. (The chunk is kDefaultChunkBytes of logits, 667 rows of GPT-2's vocabulary, so at
// B=8, T=128 it already holds two thirds of the batch.)
TEST(FusedHead, DropsTheLogitsFromTheActivationMemory) {
  const auto bytes = [](const std::string& spec, int batch) {
    auto config = parse_model_spec(spec);
    EXPECT_TRUE(config.is_ok());
    auto model = make_model(config.value(), {batch, 128});
    EXPECT_TRUE(model.is_ok());
    return model.value()->activation_bytes();
  };
  const auto logits = [](int batch) { return std::size_t(batch) * 128 * 50304 * 4; };
  const std::size_t fused8 = bytes("gpt2-tiny vocab_size=50257", 8);
  const std::size_t fused32 = bytes("gpt2-tiny vocab_size=50257", 32);
  const std::size_t plain32 = bytes("gpt2-tiny vocab_size=50257 fused_head=0", 32);
  EXPECT_LT(fused32 - fused8, (logits(32) - logits(8)) / 4) << fused8 << " -> " << fused32;
  EXPECT_LT(fused32 + logits(32) * 3 / 4, plain32) << fused32 << " vs " << plain32;
}

// Note [Head slot]: before bind, bytes_on() plans either device's slot; a CPU bind reserves the
// fused head's [rows, C] slot once (binding again adds nothing) and keeps its workspace.
TEST(LmHeadSlot, PlansTheSlotOfTheDeviceAskedAbout) {
  const TiedHeadLoss::Config config{64, 60, 8, -100, 10};
  const auto floats = [](std::int64_t n) { return ActivationArena::bytes_for(n); };
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused_head=1" : "fused_head=0");
    LmHeadSlot slot("head", fused, config);
    ActivationArena arena;
    arena.reserve(100);  // the model's other slots
    const std::size_t workspace = fused ? slot.fused_head()->workspace_bytes() : 0;
    EXPECT_TRUE(!fused || workspace > 0) << workspace;
    EXPECT_EQ(slot.bytes_on(arena, Device::kCUDA), floats(100) + floats(10 * 64));
    const std::size_t on_cpu = slot.bytes_on(arena, Device::kCPU);
    EXPECT_EQ(on_cpu, floats(100) + (fused ? floats(10 * 8) + workspace : floats(10 * 64)));

    EXPECT_EQ(slot.bind(arena, ExecContext::cpu()), fused);
    EXPECT_EQ(slot.bind(arena, ExecContext::cpu()), fused);
    EXPECT_EQ(arena.bytes(), floats(100) + (fused ? floats(10 * 8) : floats(10 * 64)));
    EXPECT_EQ(slot.bytes_on(arena, Device::kCPU), on_cpu);
    EXPECT_EQ(slot.bytes_on(arena, Device::kCUDA), floats(100) + floats(10 * 64));
    EXPECT_EQ(slot.fused_head() != nullptr, fused);
    EXPECT_EQ(fused ? slot.dhead() : slot.logits(), 1);
    EXPECT_EQ(fused ? slot.logits() : slot.dhead(), -1);
  }
}

}  // namespace
}  // namespace sparq
