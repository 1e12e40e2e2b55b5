// make_batch_source's refusals of token shards that cannot feed the model, and the file and
// key its loader errors name.
#include "train/batch_source.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "data/shard.h"

namespace sparq::train {
namespace {

std::string shard(const std::string& name, const std::string& tokenizer, std::uint32_t vocab,
                  std::size_t tokens) {
  std::vector<std::uint32_t> t(tokens);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint32_t>(i * 7 % vocab);
  const std::string path = ::testing::TempDir() + "/batch_source_" + name + ".bin";
  SPARQ_CHECK(data::write_shard(path, tokenizer, vocab, t, 1).is_ok(), "cannot write {}", path);
  return path;
}

Status make(const std::string& yaml, bool train) {
  auto config = parse_train_config(yaml, "x.yaml", {});
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  return make_batch_source(*config, train, 0, 1, 1, nullptr).status();
}

void expect_refused(const Status& s, const std::string& message) {
  ASSERT_FALSE(s.is_ok()) << "want: " << message;
  EXPECT_NE(s.message().find(message), std::string::npos)
      << "got: " << s.message() << "\nwant: " << message;
}

TEST(BatchSource, ABertModelNeedsAWordPieceShard) {
  const std::string gpt2 = shard("gpt2", "gpt2", 1000, 4096);
  const std::string bert = shard("bert", "bert-uncased", 1000, 4096);
  const std::string model = "model: {preset: bert-tiny, vocab_size: 1000, n_ctx: 64}\n";
  expect_refused(make(model + "data: {source: shard, seq_len: 32, train: " + gpt2 + "}", true),
                 "x.yaml: data.train: shard '" + gpt2 +
                     "' was made by tokenizer 'gpt2', but a "
                     "BERT model needs a 'bert-uncased' (WordPiece) shard");
  EXPECT_TRUE(
      make(model + "data: {source: shard, seq_len: 32, train: " + bert + "}", true).is_ok());
}

TEST(BatchSource, TheEvalShardMustMatchTheTrainingShard) {
  const std::string train = shard("train", "gpt2", 1000, 4096);
  const std::string other_tokenizer = shard("eval_wordpiece", "bert-uncased", 1000, 4096);
  const std::string other_vocab = shard("eval_vocab", "gpt2", 900, 4096);
  const std::string same = shard("eval_same", "gpt2", 1000, 4096);
  const std::string head =
      "model: {preset: gpt2-tiny, vocab_size: 1000, n_ctx: 64}\n"
      "data: {source: shard, seq_len: 32, train: " +
      train + ", eval: ";
  expect_refused(make(head + other_tokenizer + "}", false),
                 "x.yaml: data.eval: shard '" + other_tokenizer +
                     "' (tokenizer 'bert-uncased', "
                     "vocabulary 1000) does not match data.train '" +
                     train +
                     "' (tokenizer 'gpt2', "
                     "vocabulary 1000)");
  expect_refused(make(head + other_vocab + "}", false), "vocabulary 900) does not match");
  EXPECT_TRUE(make(head + same + "}", false).is_ok());
  EXPECT_TRUE(make(head + other_vocab + "}", true).is_ok());  // the training side is not judged
}

TEST(BatchSource, LoaderErrorsNameTheKeyAndTheFile) {
  const std::string small = shard("small", "gpt2", 1000, 100);  // 3 windows of 32 + 1
  const std::string yaml =
      "model: {preset: gpt2-tiny, vocab_size: 1000, n_ctx: 64}\n"
      "data: {source: shard, seq_len: 32, train: " +
      small +
      "}\n"
      "train: {micro_batch: 4}";
  expect_refused(make(yaml, true), "x.yaml: data.train '" + small + "': LM loader over 100 tokens");
  expect_refused(make(yaml, true), "fewer than one global batch (micro_batch 4 x 1 ranks = 4)");
  // Evaluation pads its last batch instead (data/sampler.h): the same file evaluates.
  EXPECT_TRUE(make(yaml, false).is_ok());
}

}  // namespace
}  // namespace sparq::train
