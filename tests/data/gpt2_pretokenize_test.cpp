#include "data/gpt2_pretokenize.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"

namespace sparq::data {
namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<PieceSpan> spans;
  gpt2_pretokenize(text, &spans);
  std::vector<std::string> out;
  std::size_t expect_begin = 0;
  for (const auto& s : spans) {
    EXPECT_EQ(s.begin, expect_begin) << "pieces must tile the text";
    EXPECT_LT(s.begin, s.end) << "pieces are never empty";
    expect_begin = s.end;
    out.emplace_back(text.substr(s.begin, s.end - s.begin));
  }
  EXPECT_EQ(expect_begin, text.size());
  return out;
}

using V = std::vector<std::string>;

TEST(Gpt2Pretokenize, WordsTakeOneLeadingSpace) {
  EXPECT_EQ(split("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(split("  hello"), (V{" ", " hello"}));
}

TEST(Gpt2Pretokenize, Contractions) {
  EXPECT_EQ(split("I'm can't they're we've you'll he'd it's"),
            (V{"I", "'m", " can", "'t", " they", "'re", " we", "'ve", " you", "'ll", " he", "'d",
               " it", "'s"}));
  // Only the lower-case forms are contractions; an upper-case one splits at the apostrophe.
  EXPECT_EQ(split("IT'S"), (V{"IT", "'", "S"}));
  EXPECT_EQ(split("'sam"), (V{"'s", "am"}));
  EXPECT_EQ(split(" 's"), (V{" '", "s"}));
}

TEST(Gpt2Pretokenize, NumbersAndOtherRuns) {
  EXPECT_EQ(split("123abc"), (V{"123", "abc"}));
  EXPECT_EQ(split(" 42!!"), (V{" 42", "!!"}));
  EXPECT_EQ(split("x !?."), (V{"x", " !?."}));
  EXPECT_EQ(split("3.14"), (V{"3", ".", "14"}));
}

TEST(Gpt2Pretokenize, WhitespaceRunsKeepTheirLastCharacterBack) {
  EXPECT_EQ(split("hello   \n\nworld"), (V{"hello", "   \n", "\n", "world"}));
  EXPECT_EQ(split("a\n b"), (V{"a", "\n", " b"}));
  EXPECT_EQ(split("end   "), (V{"end", "   "}));
  EXPECT_EQ(split("a\tb"), (V{"a", "\t", "b"}));
  EXPECT_EQ(split("\n\n"), (V{"\n\n"}));
}

TEST(Gpt2Pretokenize, UnicodeCategories) {
  EXPECT_EQ(split("naïve café"), (V{"naïve", " café"}));
  // A combining mark (Mn) is neither \p{L} nor \p{N}: it breaks a letter run.
  EXPECT_EQ(split("cafe\xCC\x81s"), (V{"cafe", "\xCC\x81", "s"}));
  // Emoji (So) and skin-tone modifier (Sk) are "other" and join punctuation.
  EXPECT_EQ(split("hi \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD!"),
            (V{"hi", " \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD!"}));
  EXPECT_EQ(split("\xE4\xB8\xAD\xE6\x96\x87 \xD9\xA3\xD9\xA4"),
            (V{"\xE4\xB8\xAD\xE6\x96\x87", " \xD9\xA3\xD9\xA4"}));
  // No-break space is white space, and only U+0020 may prefix a word.
  EXPECT_EQ(split("\xC2\xA0x"), (V{"\xC2\xA0", "x"}));
  EXPECT_EQ(split("1\xC2\xBD"), (V{"1\xC2\xBD"}));  // ½ is a number (No)
}

TEST(Gpt2Pretokenize, InvalidUtf8BytesAreOtherCharacters) {
  EXPECT_EQ(split("\xFF\xFE"
                  "ab"),
            (V{"\xFF\xFE", "ab"}));
  EXPECT_EQ(split("a \xC3"), (V{"a", " \xC3"}));
}

TEST(Gpt2Pretokenize, RandomBytesAlwaysTile) {
  Rng rng(7, 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(rng.below(64), '\0');
    for (char& c : s) c = static_cast<char>(rng.next_u32() & 0xFF);
    split(s);  // the tiling checks live in split()
  }
}

}  // namespace
}  // namespace sparq::data
