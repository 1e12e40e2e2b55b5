// Unicode helpers for the tokenizers: tolerant UTF-8 decoding and the character properties
// that OpenAI's GPT-2 pre-tokenizer and BERT's basic tokenizer rely on. Properties come
// from generated tables (unicode_tables.cpp, Unicode version in unicode_version()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sparq::data {

// Same order as the generator's CATEGORIES list.
enum class GeneralCategory : std::uint8_t {
  kCn,
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo
};

// Returned by decode_utf8 for a byte that does not start a valid UTF-8 sequence.
inline constexpr std::uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

// Decodes the code point at text[pos] and stores its byte length in *length (>= 1).
// Overlong forms, surrogates, values above U+10FFFF and truncated sequences are invalid:
// the single byte at pos is then reported as kInvalidCodePoint with length 1, so a caller
// can keep such bytes verbatim.
std::uint32_t decode_utf8(std::string_view text, std::size_t pos, int* length);
// Appends the UTF-8 encoding of a valid code point.
void append_utf8(std::uint32_t cp, std::string* out);

GeneralCategory general_category(std::uint32_t cp);  // kCn for kInvalidCodePoint
bool is_letter(std::uint32_t cp);                    // \p{L}
bool is_number(std::uint32_t cp);                    // \p{N}
bool is_white_space(std::uint32_t cp);               // Unicode White_Space (regex \s)
bool is_python_space(std::uint32_t cp);              // Python str.isspace()
int combining_class(std::uint32_t cp);               // canonical combining class
bool is_cased(std::uint32_t cp);
bool is_case_ignorable(std::uint32_t cp);

// Python's str.lower() applied to a whole sequence (context-dependent final sigma
// included), appended to *out.
void lower_case(const std::vector<std::uint32_t>& in, std::vector<std::uint32_t>* out);
// NFD: full canonical decomposition (Hangul by the algorithm) then canonical ordering.
void nfd(const std::vector<std::uint32_t>& in, std::vector<std::uint32_t>* out);

const char* unicode_version();

}  // namespace sparq::data
