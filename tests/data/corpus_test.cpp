// Document splitting and prepare_shards: separators, the validation split, determinism
// across thread counts, and the real WikiText-2 validation file when shared data is present.
#include "data/corpus.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/shared_data.h"
#include "core/file_io.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "data/wordpiece_tokenizer.h"

namespace sparq::data {
namespace {

using Docs = std::vector<std::string_view>;

TEST(SplitDocuments, WikiTextArticlesKeepSectionHeadings) {
  const std::string text =
      " \n = First = \n \n body one \n = = Section = = \n more \n = Second = \n two \n";
  const Docs docs = split_documents(text, InputFormat::kWikiText);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0],
            " \n = First = \n \n body one \n = = Section = = \n more \n");  // leading blank joins
  EXPECT_EQ(docs[1], " = Second = \n two \n");
}

TEST(SplitDocuments, LinesAndText) {
  EXPECT_EQ(split_documents("a b\n\nc\n", InputFormat::kLines), (Docs{"a b", "c"}));
  EXPECT_EQ(split_documents("a b\n\nc\n", InputFormat::kText), (Docs{"a b\n\nc\n"}));
  EXPECT_TRUE(split_documents("", InputFormat::kText).empty());
  EXPECT_EQ(resolve_format(InputFormat::kAuto, "/x/wiki.train.raw"), InputFormat::kWikiText);
  EXPECT_EQ(resolve_format(InputFormat::kAuto, "/x/notes.txt"), InputFormat::kText);
  EXPECT_FALSE(parse_input_format("csv").is_ok());
}

class PrepareShards : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/prepare_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_ + "/in/sub");
    ASSERT_TRUE(write_file_atomic(dir_ + "/vocab.txt",
                                  "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n##s\n.\n")
                    .is_ok());
    tok_ = WordPieceTokenizer::load(dir_ + "/vocab.txt").value();
    std::string lines;
    for (int i = 0; i < 40; ++i) lines += (i % 3 == 0) ? "the cat sat.\n" : "cats sat the dog\n";
    ASSERT_TRUE(write_file_atomic(dir_ + "/in/b.txt", lines).is_ok());
    ASSERT_TRUE(write_file_atomic(dir_ + "/in/sub/a.txt", "the cats\nsat\n").is_ok());
  }
  PrepareOptions options(const std::string& out, int threads, double val) const {
    PrepareOptions o;
    o.inputs = {dir_ + "/in"};
    o.out_dir = dir_ + "/" + out;
    o.format = InputFormat::kLines;
    o.threads = threads;
    o.val_fraction = val;
    return o;
  }
  std::string dir_;
  std::unique_ptr<WordPieceTokenizer> tok_;
};

TEST_F(PrepareShards, SeparatorsCountsAndValidationSplit) {
  auto summary = prepare_shards(*tok_, options("out", 1, 0.25));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->documents, 42u);
  EXPECT_EQ(summary->val_documents, 10u);  // floor(42 * 0.25)
  EXPECT_EQ(summary->train_documents, 32u);
  auto train = ShardReader::open(summary->train_path).value();
  auto val = ShardReader::open(summary->val_path).value();
  EXPECT_EQ(train.size(), summary->train_tokens);
  EXPECT_EQ(val.size(), summary->val_tokens);
  EXPECT_EQ(train.header().document_count, 32u);
  EXPECT_EQ(train.header().tokenizer, "bert-uncased");
  // Directories expand in sorted order: "b.txt" comes before "sub/a.txt"; document 0 is
  // "the cat sat." (train, since floor(0.25) == 0) and starts with [SEP].
  std::vector<std::uint32_t> head(5);
  train.read(0, 5, head.data());
  std::vector<std::uint32_t> expected = {tok_->sep_id()};
  tok_->encode("the cat sat.", &expected);
  EXPECT_EQ(head, expected);
  std::uint64_t seps = 0;
  for (std::uint64_t i = 0; i < val.size(); ++i) seps += val.token(i) == tok_->sep_id();
  EXPECT_EQ(seps, 10u);
}

TEST_F(PrepareShards, OutputDoesNotDependOnThreads) {
  auto one = prepare_shards(*tok_, options("t1", 1, 0.1));
  auto two = prepare_shards(*tok_, options("t2", 2, 0.1));
  ASSERT_TRUE(one.is_ok() && two.is_ok());
  EXPECT_EQ(*read_file(one->train_path), *read_file(two->train_path));
  EXPECT_EQ(*read_file(one->val_path), *read_file(two->val_path));
}

TEST_F(PrepareShards, BadArgumentsAreClearErrors) {
  auto o = options("bad", 1, 1.5);
  EXPECT_NE(prepare_shards(*tok_, o).status().message().find("--val-fraction"), std::string::npos);
  o = options("bad", 1, 0);
  o.inputs = {dir_ + "/missing.txt"};
  EXPECT_NE(prepare_shards(*tok_, o).status().message().find("missing.txt"), std::string::npos);
}

TEST(PrepareShardsGpt2, WikiTextValidRoundTrips) {
  SPARQ_REQUIRE_SHARED_DATA(raw, "wikitext-2/wiki.valid.raw");
  SPARQ_REQUIRE_SHARED_DATA(enc, "gpt2-bpe/encoder.json");
  SPARQ_REQUIRE_SHARED_DATA(bpe, "gpt2-bpe/vocab.bpe");
  auto tok = Gpt2Tokenizer::load(enc, bpe).value();
  PrepareOptions o;
  o.inputs = {raw};
  o.out_dir = ::testing::TempDir() + "/prepare_wt2";
  o.threads = 2;
  auto summary = prepare_shards(*tok, o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->documents, 60u);  // WikiText-2's validation split has 60 articles
  auto shard = ShardReader::open(summary->train_path).value();
  std::vector<std::uint32_t> ids(shard.size());
  shard.read(0, ids.size(), ids.data());
  // Dropping the separators and decoding gives back the file, byte for byte.
  std::vector<std::uint32_t> content;
  for (auto id : ids)
    if (id != tok->eot_id()) content.push_back(id);
  EXPECT_EQ(content.size() + 60, ids.size());
  EXPECT_EQ(tok->decode(content), *read_file(raw));
}

}  // namespace
}  // namespace sparq::data
