// Document splitting and prepare_shards: separators, the validation split, determinism
// across thread counts, and the real WikiText-2 validation file when shared data is present.
#include "data/corpus.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/shared_data.h"
#include "core/file_io.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "data/wordpiece_tokenizer.h"

namespace sparq::data {
namespace {

using Docs = std::vector<std::string_view>;

// As in the real files, a title follows a blank line (" "), and so does a section heading.
TEST(SplitDocuments, WikiTextArticlesKeepSectionHeadings) {
  const std::string text =
      " \n = First = \n \n body one \n \n = = Section = = \n more \n \n = Second = \n two \n";
  const Docs docs = split_documents(text, InputFormat::kWikiText);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], " \n = First = \n \n body one \n \n = = Section = = \n more \n \n");
  EXPECT_EQ(docs[1], " = Second = \n two \n");
}

// A wrapped formula inside a paragraph reads " = ... = " too; wiki.test.raw has two, which
// split their articles (review, 2026-12-07). Only a line after a blank one is a title.
TEST(SplitDocuments, AWikiTextTitleFollowsABlankLine) {
  const std::string text =
      " = First = \n \n a cut @-@ off frequency of wc \n = 1 rad / s and an impedance k = \n"
      " 1 ohm . \n \n = Second = \n two \n";
  const Docs docs = split_documents(text, InputFormat::kWikiText);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1], " = Second = \n two \n");
  EXPECT_TRUE(split_documents(" \n\n \r\n", InputFormat::kWikiText).empty());  // no article
}

TEST(SplitDocuments, CrlfLineEndsSplitLikeLf) {
  // The '\r' of "\r\n" is part of the line end: a blank CRLF line is no document, and no
  // document keeps it.
  EXPECT_EQ(split_documents("hello world\r\n\r\nsecond line\r\n", InputFormat::kLines),
            (Docs{"hello world", "second line"}));
  EXPECT_EQ(split_documents("a\r\r\nb", InputFormat::kLines), (Docs{"a\r", "b"}));  // one only
  const std::string wiki =
      " = First = \r\n body \r\n \r\n = = Sub = = \r\n \r\n = Second = \r\n two \r\n";
  const Docs docs = split_documents(wiki, InputFormat::kWikiText);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1], " = Second = \r\n two \r\n");  // articles keep their bytes
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
    std::filesystem::remove_all(dir_);  // outputs of an earlier run
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

TEST_F(PrepareShards, NameValWithAValidationSplitIsRefusedBeforeWriting) {
  // val.bin is --name train's validation split: a main shard named val would replace it
  // (once both splits were val.bin, and the training split was lost: review).
  PrepareOptions o = options("named_val", 1, 0.25);
  o.name = "val";
  auto summary = prepare_shards(*tok_, o);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_NE(summary.status().message().find("--name val"), std::string::npos)
      << summary.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/named_val/val.bin"));
  o.val_fraction = 0;  // no validation split: "val" is just a name
  ASSERT_TRUE(prepare_shards(*tok_, o).is_ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/named_val/val.bin"));
  // Another name's split is its own (validation_stem), never train's val.bin.
  o.name = "small";
  o.val_fraction = 0.25;
  auto small = prepare_shards(*tok_, o);
  ASSERT_TRUE(small.is_ok()) << small.status().message();
  EXPECT_EQ(small->val_path, dir_ + "/named_val/small.val.bin");
  // ... and a main shard named like it, with a split of its own, would replace it.
  o.name = "small.val";
  auto clash = prepare_shards(*tok_, o);
  ASSERT_FALSE(clash.is_ok());
  EXPECT_NE(clash.status().message().find(
                "--name small.val: small.val.bin is the validation split of --name small"),
            std::string::npos)
      << clash.status().message();
}

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

TEST_F(PrepareShards, OutputInsideTheInputIsNotReadBack) {
  PrepareOptions o = options("unused", 1, 0);
  o.out_dir = dir_ + "/in/out";
  auto first = prepare_shards(*tok_, o);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  auto second = prepare_shards(*tok_, o);
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  EXPECT_EQ(second->documents, first->documents);
  EXPECT_EQ(second->bytes, first->bytes);
}

TEST_F(PrepareShards, ProgressStaysWithinTheTotalWhenAFileGrows) {
  PrepareOptions o = options("grow", 1, 0);
  std::vector<PrepareProgress> seen;
  bool grown = false;
  o.on_progress = [&](const PrepareProgress& p) {
    seen.push_back(p);
    // After the first file (b.txt), sub/a.txt grows before it is read.
    if (!grown) grown = write_file_atomic(dir_ + "/in/sub/a.txt", std::string(5000, 'x')).is_ok();
  };
  ASSERT_TRUE(prepare_shards(*tok_, o).is_ok());
  ASSERT_TRUE(grown);
  for (const PrepareProgress& p : seen) {
    EXPECT_LE(p.bytes_done, p.bytes_total);
    EXPECT_LE(progress_fraction(p), 1.0);
  }
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  PrepareProgress past;
  past.bytes_done = 200, past.bytes_total = 100;
  EXPECT_EQ(progress_fraction(past), 1.0);  // whatever the cause, the bar never overflows
}

TEST_F(PrepareShards, EmptyValidationSplitIsAnError) {
  ASSERT_TRUE(write_file_atomic(dir_ + "/two.txt", "the cat\nsat\n").is_ok());
  PrepareOptions o = options("tiny", 1, 0.3);
  o.inputs = {dir_ + "/two.txt"};
  auto summary = prepare_shards(*tok_, o);
  ASSERT_FALSE(summary.is_ok());
  const std::string& m = summary.status().message();
  EXPECT_NE(m.find("floor(2 x 0.3) = 0 of the 2 documents of '" + dir_ + "/two.txt'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("--val-fraction 0.5 or more"), std::string::npos) << m;
  EXPECT_FALSE(std::filesystem::exists(o.out_dir + "/val.bin"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir + "/train.bin"));
  o.val_fraction = 0.5;
  EXPECT_TRUE(prepare_shards(*tok_, o).is_ok());
}

// WordPiece encodes a line of control characters or spaces to nothing: such documents were
// written as lone separators and counted, so val.bin could hold nothing else (review).
TEST_F(PrepareShards, DocumentsWithNoTokensAreLeftOut) {
  ASSERT_TRUE(write_file_atomic(dir_ + "/ctl.txt", "\x01\x02\n   \nthe cat\n").is_ok());
  PrepareOptions o = options("ctl", 1, 0.5);
  o.inputs = {dir_ + "/ctl.txt"};
  auto summary = prepare_shards(*tok_, o);
  ASSERT_FALSE(summary.is_ok());  // one document with tokens: no split possible
  EXPECT_NE(summary.status().message().find("hold 1 document"), std::string::npos)
      << summary.status().message();
  o.val_fraction = 0;
  summary = prepare_shards(*tok_, o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->documents, 1u);
  EXPECT_EQ(summary->empty_documents, 2u);
  EXPECT_EQ(summary->train_tokens, 3u);  // [SEP] the cat
  ASSERT_TRUE(write_file_atomic(dir_ + "/ctl.txt", "\x01\n  \n").is_ok());
  summary = prepare_shards(*tok_, o);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_NE(summary.status().message().find("contain no documents with tokens (the 2 they hold"),
            std::string::npos)
      << summary.status().message();
}

// "--out a/b/" (a trailing slash) normalizes to "a/b/", whose parent is "a/b" again: a failed
// run removed a/b and then stopped, leaving a behind (review, 2026-12-06).
TEST_F(PrepareShards, AFailedRunRemovesTheFoldersItMadeWithATrailingSlash) {
  ASSERT_TRUE(write_file_atomic(dir_ + "/blank.txt", "\n").is_ok());
  PrepareOptions o = options("unused", 1, 0);
  o.inputs = {dir_ + "/blank.txt"};
  o.out_dir = dir_ + "/made/a/b/";
  ASSERT_FALSE(prepare_shards(*tok_, o).is_ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/made"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/blank.txt"));
}

TEST_F(PrepareShards, NoDocumentsNamesTheInputs) {
  ASSERT_TRUE(write_file_atomic(dir_ + "/blank.txt", "\n\r\n\n").is_ok());
  PrepareOptions o = options("none", 1, 0);
  o.inputs = {dir_ + "/blank.txt"};
  auto summary = prepare_shards(*tok_, o);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_NE(
      summary.status().message().find("the inputs '" + dir_ + "/blank.txt' contain no documents"),
      std::string::npos)
      << summary.status().message();
}

TEST_F(PrepareShards, DocumentOverTheSizeLimitIsAnErrorNamingIt) {
  PrepareOptions o = options("big", 1, 0);
  o.max_document_bytes =
      12;  // stands in for 4 GiB: "the cat sat." is 12 bytes, "cats sat the dog" 16
  auto summary = prepare_shards(*tok_, o);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_NE(summary.status().message().find("in/b.txt': document 2 of the file is 16 bytes, more "
                                            "than the 12-byte limit"),
            std::string::npos)
      << summary.status().message();
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

// The test split's 60 articles, whose text holds two wrapped formulas that look like titles.
TEST(SplitDocuments, WikiTextTestHasItsSixtyArticles) {
  SPARQ_REQUIRE_SHARED_DATA(raw, "wikitext-2/wiki.test.raw");
  const std::string text = *read_file(raw);
  EXPECT_EQ(split_documents(text, InputFormat::kWikiText).size(), 60u);
}

// A tokenizer that runs out of memory on the document holding "huge" (a 2 GB single-document
// file needs about 30 GB to encode).
class ExhaustedTokenizer : public Tokenizer {
 public:
  std::string name() const override { return "exhausted"; }
  std::uint32_t vocab_size() const override { return 10; }
  void encode(std::string_view text, std::vector<std::uint32_t>* out) const override {
    if (text.find("huge") != std::string_view::npos) throw std::bad_alloc();
    out->push_back(1);
  }
  std::string decode(std::span<const std::uint32_t>) const override { return {}; }
  std::uint32_t document_separator() const override { return 0; }
};

// The bad_alloc of an encoder thread called std::terminate: prepare_data ended without a
// word about the input (review, 2026-12-06). It is an error naming the file and document.
TEST_F(PrepareShards, ATokenizerOutOfMemoryIsAnErrorNamingTheInput) {
  ASSERT_TRUE(write_file_atomic(dir_ + "/in/sub/a.txt", "one\ntwo\nthe huge one\nfour\n").is_ok());
  const ExhaustedTokenizer exhausted;
  for (int threads : {1, 3}) {
    auto r = prepare_shards(exhausted, options("oom" + std::to_string(threads), threads, 0));
    ASSERT_FALSE(r.is_ok()) << threads;
    EXPECT_NE(r.status().message().find("input '" + dir_ + "/in/sub/a.txt'"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("encoding document 3 (12 bytes) failed"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("out of memory"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace sparq::data
