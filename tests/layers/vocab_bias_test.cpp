// VocabBias (BERT's MLM decoder bias) on the CPU: the in-place forward by hand, and backward
// as column sums that accumulate into the bias gradient (Note [Gradient rule]).
#include <gtest/gtest.h>

#include "layer_test_util.h"
#include "layers/vocab_bias.h"

namespace sparq {
namespace {

TEST(VocabBias, ForwardAddsTheBiasToEveryRowInPlace) {
  VocabBias bias("mlm.decoder", 3);
  ParamStore store = testing::bind_layers(bias);
  EXPECT_EQ(bias.param_names(), (std::vector<std::string>{"mlm.decoder.bias"}));
  EXPECT_FALSE(store.entry("mlm.decoder.bias").spec.weight_decay);
  EXPECT_EQ(testing::to_vector(store.param("mlm.decoder.bias")), (std::vector<float>{0, 0, 0}));
  testing::copy_into(store.param("mlm.decoder.bias"), {1, -2, 0.5f});
  std::vector<float> logits{0, 0, 0, 10, 20, 30};
  bias.forward(testing::view(logits, {2, 3}));
  EXPECT_EQ(logits, (std::vector<float>{1, -2, 0.5f, 11, 18, 30.5f}));
}

TEST(VocabBias, BackwardAccumulatesColumnSumsAndLeavesDlogits) {
  VocabBias bias("head", 4);
  ParamStore store = testing::bind_layers(bias);
  // [B, T, V] leading dims are rows too: 2 x 2 rows of 4.
  std::vector<float> dl{1, 2, 3, 4, 10, 20, 30, 40, -1, 0, 1, 0, 0.5f, 0.5f, 0.5f, 0.5f};
  const auto dl_before = dl;
  bias.backward(testing::view(dl, {2, 2, 4}));
  EXPECT_EQ(testing::to_vector(store.grad("head.bias")), (std::vector<float>{10.5f, 22.5f, 34.5f, 44.5f}));
  bias.backward(testing::view(dl, {2, 2, 4}));
  EXPECT_EQ(testing::to_vector(store.grad("head.bias")), (std::vector<float>{21, 45, 69, 89}));
  EXPECT_EQ(dl, dl_before);
  std::vector<float> wrong(6);
  EXPECT_DEATH(bias.backward(testing::view(wrong, {2, 3})), "head: dlogits has shape \\[2, 3\\]");
}

}  // namespace
}  // namespace sparq
