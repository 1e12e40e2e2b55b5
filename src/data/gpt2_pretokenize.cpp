#include "data/gpt2_pretokenize.h"

#include <cstdint>
#include <limits>

#include "core/check.h"
#include "data/unicode.h"

namespace sparq::data {
namespace {

enum class CharClass : std::uint8_t { kLetter, kNumber, kSpace, kOther };

struct Char {
  std::uint32_t cp;
  std::uint32_t offset;  // byte offset of the character in the text (hence the size limit)
  CharClass cls;
};

CharClass classify(std::uint32_t cp) {
  if (cp == kInvalidCodePoint) return CharClass::kOther;
  if (is_letter(cp)) return CharClass::kLetter;
  if (is_number(cp)) return CharClass::kNumber;
  if (is_white_space(cp)) return CharClass::kSpace;
  return CharClass::kOther;
}

// Length (in characters) of the contraction starting at chars[i], or 0.
std::size_t contraction_length(const std::vector<Char>& chars, std::size_t i) {
  if (chars[i].cp != '\'' || i + 1 >= chars.size()) return 0;
  const std::uint32_t a = chars[i + 1].cp;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= chars.size()) return 0;
  const std::uint32_t b = chars[i + 2].cp;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

void gpt2_pretokenize(std::string_view text, std::vector<PieceSpan>* pieces) {
  // 32-bit offsets keep Char at 12 bytes per character; a larger text would wrap them and
  // silently produce wrong pieces. Callers with untrusted sizes check first (prepare_shards
  // reports the file and the document).
  SPARQ_CHECK(text.size() <= std::numeric_limits<std::uint32_t>::max(),
              "gpt2_pretokenize: a text of {} bytes is over the 4 GiB - 1 limit", text.size());
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    int len;
    const std::uint32_t cp = decode_utf8(text, pos, &len);
    chars.push_back({cp, static_cast<std::uint32_t>(pos), classify(cp)});
    pos += static_cast<std::size_t>(len);
  }
  const std::size_t n = chars.size();
  const auto offset = [&](std::size_t i) { return i < n ? chars[i].offset : text.size(); };
  const auto emit = [&](std::size_t b, std::size_t e) {
    pieces->push_back({offset(b), offset(e)});
  };

  std::size_t i = 0;
  while (i < n) {
    if (const std::size_t c = contraction_length(chars, i); c > 0) {
      emit(i, i + c);
      i += c;
      continue;
    }
    // ` ?X+`: the optional space only binds when a letter, number or other char follows.
    std::size_t j = i;
    if (chars[i].cp == ' ' && i + 1 < n && chars[i + 1].cls != CharClass::kSpace) j = i + 1;
    const CharClass cls = chars[j].cls;
    if (cls != CharClass::kSpace) {
      std::size_t k = j + 1;
      while (k < n && chars[k].cls == cls) ++k;
      emit(i, k);
      i = k;
      continue;
    }
    // `\s+(?!\S)|\s+`: a space run keeps its last character back for the next piece
    // unless the run ends the text or is a single character.
    std::size_t k = i + 1;
    while (k < n && chars[k].cls == CharClass::kSpace) ++k;
    const std::size_t end = (k == n || k - i == 1) ? k : k - 1;
    emit(i, end);
    i = end;
  }
}

}  // namespace sparq::data
