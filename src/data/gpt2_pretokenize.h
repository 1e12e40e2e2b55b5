// GPT-2's pre-tokenization: the split OpenAI's encoder.py makes with the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// implemented as a hand-written scanner with the same leftmost-first semantics:
//  - an apostrophe followed by s, t, re, ve, m, ll or d (lower case only) is one piece;
//  - an optional single U+0020 space, then a run of letters, of numbers, or of "other"
//    characters (neither White_Space, letter nor number);
//  - a run of white space followed by a non-space character gives up its last character
//    (which then prefixes the next piece if it is U+0020, or stands alone otherwise).
// Bytes that are not valid UTF-8 count as single "other" characters, so any byte string is
// split, and the pieces concatenate back to the input exactly.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace sparq::data {

struct PieceSpan {
  std::size_t begin = 0;  // byte offsets into the text
  std::size_t end = 0;
};

// Appends the pieces of `text` in order; they tile [0, text.size()).
// Precondition (checked, fatal): text.size() < 4 GiB, since offsets are kept in 32 bits.
void gpt2_pretokenize(std::string_view text, std::vector<PieceSpan>* pieces);

}  // namespace sparq::data
