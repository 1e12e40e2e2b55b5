// BERT WordPiece for uncased models. It follows the slow Python tokenizer of Hugging Face
// transformers (BertTokenizer with do_lower_case=True: its BasicTokenizer, then its
// WordpieceTokenizer), with the exceptions listed below.
// Basic tokenization
//  1. invalid UTF-8 bytes are dropped (transformers takes decoded text; this is what
//     google-research/bert's convert_to_unicode does with errors="ignore");
//  2. NUL, U+FFFD and every character of a general category C* (Cc, Cf, Cs, Co, Cn) other
//     than \t \n \r are removed; \t \n \r and Zs characters become spaces;
//  3. CJK Unified Ideographs (the BMP and supplementary blocks BERT lists) get spaces
//     around them, so each becomes its own word;
//  4. split on Python's str.isspace(); each word is lower-cased (Python str.lower(), final
//     sigma included), NFD-decomposed, and stripped of nonspacing marks (Mn);
//  5. each punctuation character (ASCII !../:..@/[..`/{..~ or category P*) becomes a word.
// Then WordPiece: greedy longest-match-first from the left; pieces after the first carry a
// "##" prefix; a word longer than kMaxWordChars (100) code points, or one with an unmatched
// remainder, becomes a single [UNK].
//
// Where google-research/bert's tokenization.py differs: step 2 removes only Cc and Cf
// (private-use, surrogate and unassigned characters are kept), and the word limit is 200.
// Where this code differs from transformers' BertTokenizer:
//  - special-token spellings in the text ("[MASK]") are not recognised: they are split like
//    any other text, as google's tokenizer does (transformers keeps them whole);
//  - no NFC normalisation before step 4 (newer transformers releases add one);
//  - a token that appears twice in vocab.txt keeps its FIRST id (both references build a
//    dict line by line, so there the last id wins); bert-base-uncased has no repeats.
//
// vocab.txt: one token per line, id = line number - 1, ASCII white space (" \t\r\f\v")
// stripped at both ends (google strips all white space, transformers only the newline).
// It must contain [PAD], [UNK], [CLS], [SEP] and [MASK].
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace sparq::data {

class WordPieceTokenizer final : public Tokenizer {
 public:
  static constexpr std::size_t kMaxWordChars = 100;

  static Result<std::unique_ptr<WordPieceTokenizer>> load(const std::string& vocab_path);

  std::string name() const override { return "bert-uncased"; }
  std::uint32_t vocab_size() const override { return static_cast<std::uint32_t>(tokens_.size()); }
  void encode(std::string_view text, std::vector<std::uint32_t>* out) const override;
  // Tokens joined by spaces, "##" pieces glued to their predecessor (lossy: case, accents
  // and original spacing are gone).
  std::string decode(std::span<const std::uint32_t> ids) const override;
  std::uint32_t document_separator() const override { return sep_id_; }

  // The basic tokenizer's words (steps 1-5 above), as UTF-8.
  std::vector<std::string> basic_tokenize(std::string_view text) const;
  // Token strings instead of ids.
  std::vector<std::string> tokenize(std::string_view text) const;
  long token_id(const std::string& token) const;  // -1 when absent
  const std::string& token(std::uint32_t id) const { return tokens_.at(id); }

  std::uint32_t pad_id() const { return pad_id_; }
  std::uint32_t unk_id() const { return unk_id_; }
  std::uint32_t cls_id() const { return cls_id_; }
  std::uint32_t sep_id() const { return sep_id_; }
  std::uint32_t mask_id() const { return mask_id_; }

 private:
  WordPieceTokenizer() = default;
  void wordpiece(const std::string& word, std::size_t num_chars,
                 std::vector<std::uint32_t>* out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::uint32_t pad_id_ = 0, unk_id_ = 0, cls_id_ = 0, sep_id_ = 0, mask_id_ = 0;
};

// BERT's test for "Chinese characters" (the CJK Unified Ideograph blocks it enumerates).
bool is_cjk_ideograph(std::uint32_t cp);

}  // namespace sparq::data
