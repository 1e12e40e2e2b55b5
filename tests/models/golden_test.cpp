// Golden tests: sparq's GPT-2, BERT and VGG against the independent PyTorch implementations
// of tests/reference/gen_models.py, from identical formula weights and stored inputs:
// logits, loss, every parameter gradient, and a 3-step SGD loss trajectory (golden_check.h;
// cuda_golden_test.cpp runs the same checks on the GPU).
#include <gtest/gtest.h>

#include "core/ops.h"
#include "models/golden_check.h"

namespace sparq {
namespace {

using testing::GoldenCase;

void load_case(const std::string& file, GoldenCase* out, const std::string& spec_suffix = "") {
  testing::load_golden_case(file, ExecContext::cpu(), out, spec_suffix);
}

TEST(ModelGolden, Gpt2ShortContextMatchesPyTorch) {
  GoldenCase c;
  ASSERT_NO_FATAL_FAILURE(load_case("gpt2.golden", &c));
  ASSERT_LT(c.golden.seq, c.model->config().n_ctx) << "the case must use a shorter context";
  ASSERT_GT(c.model->config().padded_vocab(), c.model->config().vocab_size);
  testing::check_golden_phase(c, "train", true);
  testing::check_golden_trajectory(c);
}

// The language models again with the materialized head (Embedding::project + CrossEntropy),
// which keeps the logits: those are compared too.
TEST(ModelGolden, UnfusedHeadsMatchPyTorch) {
  for (const char* file : {"gpt2.golden", "bert.golden"}) {
    GoldenCase c;
    ASSERT_NO_FATAL_FAILURE(load_case(file, &c, " fused_head=0"));
    ASSERT_FALSE(c.model->fused_head());
    testing::check_golden_phase(c, "train", true);
    testing::check_golden_trajectory(c);
  }
}

TEST(ModelGolden, Gpt2PaddedVocabularyIsNeverPredicted) {
  for (const char* suffix : {"", " fused_head=0"}) {
    GoldenCase c;
    ASSERT_NO_FATAL_FAILURE(load_case("gpt2.golden", &c, suffix));
    c.store.zero_grads();
    c.model->forward_for_backward(c.batch);
    c.model->backward();
    // Padded rows of the tied table get no gradient: neither looked up nor given probability.
    const ModelConfig& cfg = c.model->config();
    const Tensor dwte = c.store.grad("wte.weight");
    const float* pad = dwte.data<float>() + cfg.vocab_size * cfg.n_embd;
    const auto count = static_cast<std::size_t>((cfg.padded_vocab() - cfg.vocab_size) * cfg.n_embd);
    EXPECT_EQ(ops::max_abs(pad, count), 0.0f) << "fused head: " << c.model->fused_head();
    if (c.model->fused_head()) continue;  // no logits kept
    // After backward the logits buffer holds dloss/dlogits: zero in the padded columns.
    const Tensor dlogits = c.model->logits();
    const std::int64_t v = dlogits.dim(2);
    for (std::int64_t r = 0; r < dlogits.numel() / v; ++r) {
      for (std::int64_t j = cfg.vocab_size; j < v; ++j) {
        ASSERT_EQ(dlogits.data<float>()[r * v + j], 0.0f) << "row " << r << " column " << j;
      }
    }
  }
}

TEST(ModelGolden, BertWithPaddingAndNspMatchesPyTorch) {
  GoldenCase c;
  ASSERT_NO_FATAL_FAILURE(load_case("bert.golden", &c));
  // The case must exercise padding: some attention-mask entries are zero.
  const Tensor& mask = c.batch.attention_mask;
  std::int64_t padded = 0;
  for (std::int64_t i = 0; i < mask.numel(); ++i) padded += mask.data<std::uint8_t>()[i] == 0;
  ASSERT_GT(padded, 0);
  testing::check_golden_phase(c, "train", true);
  testing::check_golden_trajectory(c);
}

TEST(ModelGolden, VggTrainAndEvalMatchPyTorch) {
  GoldenCase c;
  ASSERT_NO_FATAL_FAILURE(load_case("vgg.golden", &c));
  testing::check_golden_phase(c, "train", true);  // batch statistics; updates running ones
  testing::check_golden_phase(c, "eval", false);  // running statistics
  testing::check_golden_trajectory(c);
}

}  // namespace
}  // namespace sparq
