// Unknown config keys come with the key the user most likely meant (train/key_suggestion.h):
// only compressor keys listed theirs (review, 2026-12-08).
#include "train/key_suggestion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "train/train_config.h"

namespace sparq::train {
namespace {

TEST(KeySuggestion, NamesTheKeyMeant) {
  const std::vector<std::string> known = {
      "optim.lr",    "optim.min_lr",         "train.micro_batch",
      "train.steps", "compress.lbs.density", "compress.topk.density",
      "data.markov."};
  EXPECT_EQ(nearest_known_key("optim.lrr", known), "optim.lr");
  EXPECT_EQ(nearest_known_key("train.batch_size", known), "train.micro_batch");
  EXPECT_EQ(nearest_known_key("optim.learning_rate", known), "optim.lr");
  EXPECT_EQ(nearest_known_key("optimizer.lr", known), "optim.lr");
  EXPECT_EQ(nearest_known_key("train.stpes", known), "train.steps");
  // Nothing near, or a last part that several sections share: nothing offered.
  EXPECT_EQ(nearest_known_key("log.colour", known), "");
  EXPECT_EQ(nearest_known_key("compress.density_of_it", known), "");
}

TEST(KeySuggestion, UnknownKeyErrorsSayIt) {
  auto c = parse_train_config("train: {batch_size: 16}\n", "hint.yaml", {"optim.lrr=0.1"});
  ASSERT_FALSE(c.is_ok());
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("hint.yaml: unknown key train.batch_size (did you mean train.micro_batch?)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("--set: unknown key optim.lrr (did you mean optim.lr?)"), std::string::npos)
      << m;
}

}  // namespace
}  // namespace sparq::train
