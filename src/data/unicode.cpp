#include "data/unicode.h"

#include <algorithm>
#include <array>

#include "data/unicode_tables.h"

namespace sparq::data {
namespace ut = unicode_tables;
namespace {

constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;

// Value of the range containing cp in a (starts, values) range table.
template <typename V>
V range_lookup(const std::uint32_t* starts, const V* values, std::size_t n, std::uint32_t cp) {
  const std::uint32_t* it = std::upper_bound(starts, starts + n, cp);
  return values[(it - starts) - 1];  // starts[0] == 0, so it > starts
}

// Index of cp in a sorted table, or -1.
long find_sorted(const std::uint32_t* table, std::size_t n, std::uint32_t cp) {
  const std::uint32_t* it = std::lower_bound(table, table + n, cp);
  return (it != table + n && *it == cp) ? it - table : -1;
}

std::uint8_t case_flags(std::uint32_t cp) {
  if (cp > kMaxCodePoint) return 0;
  return range_lookup(ut::kCaseFlagStarts, ut::kCaseFlagValues, ut::kCaseFlagStartsSize, cp);
}

// Hangul syllable composition constants (Unicode ch. 3.12).
constexpr std::uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr std::uint32_t kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr std::uint32_t kSCount = 19 * kNCount;

void decompose(std::uint32_t cp, std::vector<std::uint32_t>* out) {
  if (cp < 0xC0) {  // nothing below U+00C0 decomposes
    out->push_back(cp);
    return;
  }
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const std::uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const long i = find_sorted(ut::kDecompFrom, ut::kDecompFromSize, cp);
  if (i < 0) {
    out->push_back(cp);
    return;
  }
  const std::uint32_t ref = ut::kDecompRef[i];
  const std::uint32_t* begin = ut::kDecompPool + (ref >> 8);
  out->insert(out->end(), begin, begin + (ref & 0xFF));
}

}  // namespace

std::uint32_t decode_utf8(std::string_view text, std::size_t pos, int* length) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t b0 = byte(pos);
  *length = 1;
  if (b0 < 0x80) return b0;
  int n;
  std::uint32_t cp, min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return kInvalidCodePoint;
  }
  if (pos + n > text.size()) return kInvalidCodePoint;
  for (int k = 1; k < n; ++k) {
    const std::uint8_t b = byte(pos + k);
    if ((b & 0xC0) != 0x80) return kInvalidCodePoint;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalidCodePoint;
  *length = n;
  return cp;
}

void append_utf8(std::uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

GeneralCategory general_category(std::uint32_t cp) {
  // Latin-1 dominates real text: answer it from a small table instead of a binary search.
  static const std::array<std::uint8_t, 256> latin1 = [] {
    std::array<std::uint8_t, 256> t{};
    for (std::uint32_t c = 0; c < 256; ++c) {
      t[c] = range_lookup(ut::kCategoryStarts, ut::kCategoryValues, ut::kCategoryStartsSize, c);
    }
    return t;
  }();
  if (cp < 256) return static_cast<GeneralCategory>(latin1[cp]);
  if (cp > kMaxCodePoint) return GeneralCategory::kCn;
  return static_cast<GeneralCategory>(
      range_lookup(ut::kCategoryStarts, ut::kCategoryValues, ut::kCategoryStartsSize, cp));
}

bool is_letter(std::uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  const auto c = general_category(cp);
  return c >= GeneralCategory::kLu && c <= GeneralCategory::kLo;
}

bool is_number(std::uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto c = general_category(cp);
  return c >= GeneralCategory::kNd && c <= GeneralCategory::kNo;
}

bool is_white_space(std::uint32_t cp) {
  // The Unicode White_Space property (PropList.txt), which is what \s matches in the
  // `regex` module that OpenAI's encoder uses; stable since Unicode 6.
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_python_space(std::uint32_t cp) {
  return find_sorted(ut::kPythonSpaces, ut::kPythonSpacesSize, cp) >= 0;
}

int combining_class(std::uint32_t cp) {
  if (cp < 0x300 || cp > kMaxCodePoint) return 0;
  return range_lookup(ut::kCombiningStarts, ut::kCombiningValues, ut::kCombiningStartsSize, cp);
}

bool is_cased(std::uint32_t cp) { return case_flags(cp) & 1; }
bool is_case_ignorable(std::uint32_t cp) { return case_flags(cp) & 2; }

void lower_case(const std::vector<std::uint32_t>& in, std::vector<std::uint32_t>* out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint32_t cp = in[i];
    if (cp < 0x80) {
      out->push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    } else if (cp == 0x03A3) {
      // Final_Sigma (SpecialCasing.txt): a cased letter, then case-ignorables, then sigma,
      // and no case-ignorables-then-cased after it. Python's str.lower() applies this.
      std::size_t j = i;
      while (j > 0 && is_case_ignorable(in[j - 1])) --j;
      bool final_sigma = j > 0 && is_cased(in[j - 1]);
      if (final_sigma) {
        std::size_t k = i + 1;
        while (k < in.size() && is_case_ignorable(in[k])) ++k;
        final_sigma = k == in.size() || !is_cased(in[k]);
      }
      out->push_back(final_sigma ? 0x03C2 : 0x03C3);
    } else if (const long s = find_sorted(ut::kLowerFrom, ut::kLowerFromSize, cp); s >= 0) {
      out->push_back(ut::kLowerTo[s]);
    } else {
      bool expanded = false;
      for (std::size_t r = 0; r + 5 <= ut::kLowerMultiSize; r += 5) {
        if (ut::kLowerMulti[r] != cp) continue;
        out->insert(out->end(), ut::kLowerMulti + r + 2,
                    ut::kLowerMulti + r + 2 + ut::kLowerMulti[r + 1]);
        expanded = true;
      }
      if (!expanded) out->push_back(cp);
    }
  }
}

void nfd(const std::vector<std::uint32_t>& in, std::vector<std::uint32_t>* out) {
  const std::size_t first = out->size();
  for (std::uint32_t cp : in) decompose(cp, out);
  // Canonical ordering: stable sort of every run of non-starters by combining class.
  auto it = out->begin() + static_cast<std::ptrdiff_t>(first);
  while (it != out->end()) {
    if (combining_class(*it) == 0) {
      ++it;
      continue;
    }
    auto end = it;
    while (end != out->end() && combining_class(*end) != 0) ++end;
    std::stable_sort(it, end, [](std::uint32_t a, std::uint32_t b) {
      return combining_class(a) < combining_class(b);
    });
    it = end;
  }
}

const char* unicode_version() { return ut::kUnicodeVersion; }

}  // namespace sparq::data
