// make_batch_source's refusals of token shards that cannot feed the model, and the file and
// key its loader errors name.
#include "train/batch_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "data/shard.h"

namespace sparq::train {
namespace {

// Tokens i * 7 % vocab after a first `separator` (prepare_data starts every document with
// the tokenizer's: [SEP], 102 in the default BERT vocabulary).
std::string shard(const std::string& name, const std::string& tokenizer, std::uint32_t vocab,
                  std::size_t tokens, std::uint32_t separator = 102) {
  std::vector<std::uint32_t> t(tokens);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint32_t>(i * 7 % vocab);
  t[0] = separator;
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

// No data source gives NSP pairs: the dry run passed and the first step aborted (review,
// 2026-12-07). The config itself stays valid (the simulator prices the head).
TEST(BatchSource, NoSourceFeedsBertsNextSentenceHead) {
  const std::string yaml = "model: {preset: bert-tiny, nsp: 1}\n";
  ASSERT_TRUE(parse_train_config(yaml, "x.yaml", {}).is_ok());
  expect_refused(make(yaml, true),
                 "x.yaml: model.nsp: 1 trains a next-sentence head, which needs sentence pairs");
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
  // A GPT-2 shard's vocabulary above the model's: the tokenizer is said first (it said the
  // vocabulary, which sent the user to raise vocab_size; review, 2026-12-08).
  const std::string big = shard("gpt2_big", "gpt2", 2000, 4096);
  expect_refused(make(model + "data: {source: shard, seq_len: 32, train: " + big + "}", true),
                 "was made by tokenizer 'gpt2', but a BERT model needs a 'bert-uncased'");
}

// A WordPiece shard made with a vocabulary whose [SEP] is not data.sep_id trained with its
// documents split at an ordinary word and [MASK] an ordinary word (review, 2026-12-06).
TEST(BatchSource, ABertShardsSeparatorMustBeDataSepId) {
  const std::string own_vocab = shard("bert_own_vocab", "bert-uncased", 1000, 4096, 3);
  const std::string model = "model: {preset: bert-tiny, vocab_size: 1000, n_ctx: 64}\n";
  const std::string data = "data: {source: shard, seq_len: 32, train: " + own_vocab;
  expect_refused(make(model + data + "}", true),
                 "x.yaml: data.train: shard '" + own_vocab +
                     "' starts with token 3, the [SEP] of the vocabulary it was made with "
                     "(prepare_data starts every document with it), but data.sep_id is 102");
  EXPECT_TRUE(make(model + data + ", sep_id: 3, cls_id: 2, mask_id: 4}", true).is_ok());
}

TEST(BatchSource, ADirectoryOrFifoIsNotAShard) {
  const std::string dir = ::testing::TempDir() + "/batch_source_a_directory";
  std::filesystem::create_directories(dir);
  const std::string model = "model: {preset: gpt2-tiny, vocab_size: 1000, n_ctx: 64}\n";
  expect_refused(make(model + "data: {source: shard, seq_len: 32, train: " + dir + "}", true),
                 "x.yaml: data.train: shard '" + dir +
                     "' is a directory, not a token shard (prepare_data --out DIR writes "
                     "DIR/<name>.bin, and DIR/val.bin or DIR/<name>.val.bin)");
  // A FIFO blocked the open until a writer came.
  const std::string fifo = ::testing::TempDir() + "/batch_source_a_fifo";
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  expect_refused(make(model + "data: {source: shard, seq_len: 32, train: " + fifo + "}", true),
                 "shard '" + fifo + "' is not a regular file");
  std::filesystem::remove(fifo);
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

// On the Markov source, BERT's special ids are never text: [CLS] and [SEP] frame each row,
// [MASK] stands only where a target is asked for, [PAD] only after [SEP], and no target is a
// special id (review, 2026-12-05: the chain emitted all four as ordinary tokens). A labelled
// position may hold any id: MLM's random replacement draws from the whole vocabulary.
TEST(BatchSource, BertOnMarkovTextSeesSpecialIdsOnlyInTheirRoles) {
  auto config = parse_train_config(
      "model: {preset: bert-tiny, vocab_size: 256, n_ctx: 64}\n"
      "data: {source: markov, seq_len: 32, markov: {train_tokens: 8192}}\n"
      "train: {micro_batch: 8}",
      "x.yaml", {});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  auto source = make_batch_source(*config, true, 0, 1, 1, nullptr);
  ASSERT_TRUE(source.is_ok()) << source.status().message();
  const std::int32_t pad = 0, cls = 101, sep = 102, mask = 103;
  int masked = 0, text = 0;
  for (int step = 0; step < 8; ++step) {
    const Batch b = (*source)->next(0);
    const std::int64_t rows = b.tokens.shape()[0], cols = b.tokens.shape()[1];
    const auto* ids = b.tokens.data<std::int32_t>();
    const auto* targets = b.targets.data<std::int32_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(ids[r * cols], cls);
      bool after_sep = false;
      for (std::int64_t i = 1; i < cols; ++i) {
        const std::int32_t id = ids[r * cols + i], target = targets[r * cols + i];
        if (target != kIgnoreIndex) {
          EXPECT_TRUE(target != pad && target != cls && target != sep && target != mask)
              << "target " << target << " at row " << r << " column " << i;
        }
        if (after_sep) {
          EXPECT_EQ(id, pad) << "row " << r << " column " << i;
        } else if (target != kIgnoreIndex) {
          masked += id == mask ? 1 : 0;  // a labelled position may hold any id (80/10/10)
        } else if (id == sep) {
          after_sep = true;
        } else {
          EXPECT_TRUE(id != pad && id != cls && id != mask)
              << "id " << id << " at row " << r << " column " << i;
          ++text;
        }
      }
      EXPECT_TRUE(after_sep) << "row " << r << " has no [SEP]";
    }
  }
  EXPECT_GT(masked, 0);
  EXPECT_GT(text, 1000);
}

// A partial CIFAR-10 download trains on the batches present; the start-up line names the
// missing ones (review, 2026-12-06: easy to miss).
TEST(BatchSource, APartialCifarDownloadNamesTheMissingBatches) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "cifar_partial";
  std::filesystem::create_directories(dir);
  std::string records;
  for (int i = 0; i < 3; ++i) records += static_cast<char>(i) + std::string(3072, '\x40');
  for (const char* name : {"data_batch_2.bin", "test_batch.bin"}) {
    ASSERT_TRUE(write_file_atomic((dir / name).string(), records).is_ok());
  }
  auto config = parse_train_config(
      "model: {preset: vgg-tiny}\ntrain: {micro_batch: 1}\ndata: {source: cifar10, train: " +
          dir.string() + "}\n",
      "x.yaml", {});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  DataInfo info;
  auto source = make_batch_source(*config, true, 0, 1, 1, &info);
  ASSERT_TRUE(source.is_ok()) << source.status().message();
  EXPECT_NE(info.description.find("(3 images; 4 of the 5 training batches missing: "
                                  "data_batch_1.bin, data_batch_3.bin, data_batch_4.bin, "
                                  "data_batch_5.bin)"),
            std::string::npos)
      << info.description;
  DataInfo eval_info;
  ASSERT_TRUE(make_batch_source(*config, false, 0, 1, 1, &eval_info).is_ok());
  EXPECT_EQ(eval_info.description.find("missing"), std::string::npos) << eval_info.description;
}

}  // namespace
}  // namespace sparq::train
