// BERT uncased WordPiece against the real bert-base-uncased vocab (skipped without
// ../shared/data). Expectations follow BERT's published rules; token strings, not ids.
#include <gtest/gtest.h>

#include "common/shared_data.h"
#include "core/file_io.h"
#include "data/unicode.h"
#include "data/wordpiece_tokenizer.h"

namespace sparq::data {
namespace {

using V = std::vector<std::string>;

class WordPieceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path =
        sparq::testing::shared_data_file("bert-vocab/bert-base-uncased-vocab.txt");
    if (path.empty()) GTEST_SKIP() << "../shared/data/bert-vocab not found: skipped";
    auto tok = WordPieceTokenizer::load(path);
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    tok_ = std::move(tok).value();
  }
  bool has(const std::string& t) const { return tok_->token_id(t) >= 0; }
  std::unique_ptr<WordPieceTokenizer> tok_;
};

TEST_F(WordPieceTest, SpecialTokensAreDistinct) {
  EXPECT_EQ(tok_->token(tok_->cls_id()), "[CLS]");
  EXPECT_EQ(tok_->token(tok_->sep_id()), "[SEP]");
  EXPECT_EQ(tok_->token(tok_->mask_id()), "[MASK]");
  EXPECT_EQ(tok_->token(tok_->pad_id()), "[PAD]");
  EXPECT_EQ(tok_->token(tok_->unk_id()), "[UNK]");
  EXPECT_EQ(tok_->vocab_size(), 30522u);
}

TEST_F(WordPieceTest, LowerCasesAndSplitsPunctuation) {
  EXPECT_EQ(tok_->tokenize("Hello, World!"), (V{"hello", ",", "world", "!"}));
  EXPECT_EQ(tok_->tokenize("don't"), (V{"don", "'", "t"}));
  EXPECT_EQ(tok_->basic_tokenize("a-b...c"), (V{"a", "-", "b", ".", ".", ".", "c"}));
  EXPECT_EQ(tok_->basic_tokenize("\xE2\x80\x9Cquoted\xE2\x80\x9D"),
            (V{"\xE2\x80\x9C", "quoted", "\xE2\x80\x9D"}));
  EXPECT_EQ(tok_->basic_tokenize("$5 + ^"),
            (V{"$", "5", "+", "^"}));  // ASCII symbols count as punctuation
}

TEST_F(WordPieceTest, StripsAccentsThroughDecomposition) {
  EXPECT_EQ(tok_->basic_tokenize("Héllo Ångström CAFÉ cafe\xCC\x81"),
            (V{"hello", "angstrom", "cafe", "cafe"}));
  // Final sigma survives lower-casing (it is not an accent).
  EXPECT_EQ(tok_->basic_tokenize("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"),
            (V{"\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82"}));
  // Hangul syllables decompose into conjoining jamo.
  EXPECT_EQ(tok_->basic_tokenize("\xED\x95\x9C"), (V{"\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"}));
}

TEST_F(WordPieceTest, CjkIdeographsBecomeWords) {
  EXPECT_EQ(tok_->basic_tokenize("ab\xE4\xB8\xAD\xE6\x96\x87"
                                 "cd"),
            (V{"ab", "\xE4\xB8\xAD", "\xE6\x96\x87", "cd"}));
  // Hiragana is not in BERT's CJK list and stays in its word.
  EXPECT_EQ(tok_->basic_tokenize("\xE3\x81\x82\xE3\x81\x84"), (V{"\xE3\x81\x82\xE3\x81\x84"}));
}

TEST_F(WordPieceTest, CleansControlsWhitespaceAndInvalidBytes) {
  EXPECT_EQ(tok_->basic_tokenize("a\x01"
                                 "b\xE2\x80\x8B"
                                 "c\xEF\xBF\xBD"
                                 "d"),
            (V{"abcd"}));
  EXPECT_EQ(tok_->basic_tokenize("x\ty\nz\r\nw\xC2\xA0v\xE2\x80\xA8u"),
            (V{"x", "y", "z", "w", "v", "u"}));
  EXPECT_EQ(tok_->basic_tokenize("ab\xFF"
                                 "cd"),
            (V{"abcd"}));
  EXPECT_TRUE(tok_->tokenize(" \t\n ").empty());
}

TEST_F(WordPieceTest, GreedyLongestMatchFirst) {
  const V pieces = tok_->tokenize("unaffable");
  ASSERT_GT(pieces.size(), 1u);
  std::string joined;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].starts_with("##"), i > 0);
    joined += i > 0 ? pieces[i].substr(2) : pieces[i];
  }
  EXPECT_EQ(joined, "unaffable");
  // The first piece is the LONGEST vocabulary prefix.
  for (std::size_t len = pieces[0].size() + 1; len <= 9; ++len)
    EXPECT_FALSE(has(std::string("unaffable").substr(0, len)));
  for (const char* word : {"the", "running", "university"}) {
    ASSERT_TRUE(has(word));
    EXPECT_EQ(tok_->tokenize(word), (V{word}));
  }
}

TEST_F(WordPieceTest, UnknownWords) {
  const std::string crab = "\xF0\x9F\xA6\x80";  // U+1F980, not in the vocab
  ASSERT_FALSE(has(crab));
  ASSERT_FALSE(has("##" + crab));
  EXPECT_EQ(tok_->tokenize("x" + crab + " ok"), (V{"[UNK]", "ok"}));
  EXPECT_EQ(tok_->tokenize(std::string(101, 'a')), (V{"[UNK]"}));
  const V hundred = tok_->tokenize(std::string(100, 'a'));
  EXPECT_NE(hundred, (V{"[UNK]"}));
  EXPECT_GT(hundred.size(), 1u);
}

TEST_F(WordPieceTest, EncodeAndDecode) {
  std::vector<std::uint32_t> ids;
  tok_->encode("The Quick brown fox.", &ids);
  EXPECT_EQ(tok_->decode(ids), "the quick brown fox .");
}

TEST(WordPieceLoad, VocabWithoutSpecialTokensIsRejected) {
  const std::string path = ::testing::TempDir() + "/tiny_vocab.txt";
  ASSERT_TRUE(write_file_atomic(path, "[PAD]\n[UNK]\nhello\n").is_ok());
  auto tok = WordPieceTokenizer::load(path);
  ASSERT_FALSE(tok.is_ok());
  EXPECT_NE(tok.status().message().find("[CLS]"), std::string::npos) << tok.status().message();
}

TEST(WordPieceLoad, TinyVocabularyWorksWithoutSharedData) {
  const std::string path = ::testing::TempDir() + "/tiny_vocab2.txt";
  ASSERT_TRUE(
      write_file_atomic(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nplay\n##ing\n##s\n,\n").is_ok());
  auto tok = WordPieceTokenizer::load(path);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  EXPECT_EQ((*tok)->tokenize("Playing, plays PLAYX"),
            (V{"play", "##ing", ",", "play", "##s", "[UNK]"}));
}

}  // namespace
}  // namespace sparq::data
