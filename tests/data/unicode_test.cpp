#include "data/unicode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sparq::data {
namespace {

std::vector<std::uint32_t> decode_all(std::string_view s) {
  std::vector<std::uint32_t> out;
  for (std::size_t pos = 0; pos < s.size();) {
    int len;
    out.push_back(decode_utf8(s, pos, &len));
    pos += static_cast<std::size_t>(len);
  }
  return out;
}

TEST(Utf8, DecodesValidSequencesOfEveryLength) {
  EXPECT_EQ(decode_all("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"),
            (std::vector<std::uint32_t>{'a', 0xE9, 0x20AC, 0x1F600}));
}

TEST(Utf8, RejectsMalformedBytesOneAtATime) {
  const std::uint32_t bad = kInvalidCodePoint;
  EXPECT_EQ(decode_all("\xC0\x80"), (std::vector<std::uint32_t>{bad, bad}));           // overlong
  EXPECT_EQ(decode_all("\xED\xA0\x80"), (std::vector<std::uint32_t>{bad, bad, bad}));  // surrogate
  EXPECT_EQ(decode_all("\xF4\x90\x80\x80"), (std::vector<std::uint32_t>{bad, bad, bad, bad}));
  EXPECT_EQ(decode_all("\xE2\x82"), (std::vector<std::uint32_t>{bad, bad}));  // truncated
  EXPECT_EQ(decode_all("\xE2\x82Z"), (std::vector<std::uint32_t>{bad, bad, 'Z'}));
}

TEST(Utf8, AppendInvertsDecode) {
  for (std::uint32_t cp : {0x41u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    append_utf8(cp, &s);
    int len;
    EXPECT_EQ(decode_utf8(s, 0, &len), cp);
    EXPECT_EQ(static_cast<std::size_t>(len), s.size());
  }
}

TEST(UnicodeProperties, LettersNumbersAndSpaces) {
  EXPECT_TRUE(is_letter('q'));
  EXPECT_TRUE(is_letter(0xE9));     // é
  EXPECT_TRUE(is_letter(0x4E2D));   // CJK ideograph (Lo)
  EXPECT_TRUE(is_letter(0x02B0));   // modifier letter (Lm)
  EXPECT_FALSE(is_letter(0x0301));  // combining acute (Mn)
  EXPECT_FALSE(is_letter(0x1F600));
  EXPECT_TRUE(is_number(0x0663));  // Arabic-Indic three (Nd)
  EXPECT_TRUE(is_number(0x216B));  // Roman numeral twelve (Nl)
  EXPECT_TRUE(is_number(0xBD));    // one half (No)
  EXPECT_TRUE(is_white_space(0x3000));
  EXPECT_TRUE(is_white_space(0x85));
  EXPECT_FALSE(is_white_space(0x1C));    // not White_Space ...
  EXPECT_TRUE(is_python_space(0x1C));    // ... but Python's isspace() says yes
  EXPECT_FALSE(is_white_space(0x200B));  // zero width space is Cf
  EXPECT_EQ(general_category(0x10FFFF), GeneralCategory::kCn);
  EXPECT_EQ(general_category(kInvalidCodePoint), GeneralCategory::kCn);
}

TEST(UnicodeCase, LowerCaseIncludingFinalSigmaAndExpansions) {
  std::vector<std::uint32_t> out;
  lower_case({0x039F, 0x0394, 0x039F, 0x03A3}, &out);  // ΟΔΟΣ
  EXPECT_EQ(out, (std::vector<std::uint32_t>{0x03BF, 0x03B4, 0x03BF, 0x03C2}));
  out.clear();
  lower_case({0x03A3, 0x0391}, &out);  // Σ at the start is not final
  EXPECT_EQ(out, (std::vector<std::uint32_t>{0x03C3, 0x03B1}));
  out.clear();
  lower_case({0x0130, 'A'}, &out);  // İ lower-cases to i + combining dot above
  EXPECT_EQ(out, (std::vector<std::uint32_t>{'i', 0x0307, 'a'}));
}

TEST(UnicodeNfd, DecomposesAndOrdersMarks) {
  std::vector<std::uint32_t> out;
  nfd({0xE9}, &out);  // é
  EXPECT_EQ(out, (std::vector<std::uint32_t>{'e', 0x0301}));
  out.clear();
  nfd({0xD55C}, &out);  // Hangul syllable HAN -> L V T jamo
  EXPECT_EQ(out, (std::vector<std::uint32_t>{0x1112, 0x1161, 0x11AB}));
  out.clear();
  nfd({'a', 0x0301, 0x0323}, &out);  // acute (230) after dot below (220)
  EXPECT_EQ(out, (std::vector<std::uint32_t>{'a', 0x0323, 0x0301}));
  out.clear();
  nfd({0x1E09}, &out);  // ḉ: two levels of decomposition
  EXPECT_EQ(out, (std::vector<std::uint32_t>{'c', 0x0327, 0x0301}));
}

}  // namespace
}  // namespace sparq::data
