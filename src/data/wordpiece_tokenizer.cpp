#include "data/wordpiece_tokenizer.h"

#include "core/check.h"
#include "core/file_io.h"
#include "data/unicode.h"

namespace sparq::data {
namespace {

using GC = GeneralCategory;

bool is_control(std::uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  const GC c = general_category(cp);
  return c == GC::kCc || c == GC::kCf || c == GC::kCs || c == GC::kCo || c == GC::kCn;
}

bool is_bert_whitespace(std::uint32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || general_category(cp) == GC::kZs;
}

bool is_punctuation(std::uint32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126)) {
    return true;
  }
  const GC c = general_category(cp);
  return c >= GC::kPc && c <= GC::kPo;
}

std::string to_utf8(const std::vector<std::uint32_t>& cps) {
  std::string s;
  for (const std::uint32_t cp : cps) append_utf8(cp, &s);
  return s;
}

// Steps 1-3 of the basic tokenizer, then the split on white space (step 4's first part).
std::vector<std::vector<std::uint32_t>> clean_and_split(std::string_view text) {
  std::vector<std::vector<std::uint32_t>> words(1);
  const auto end_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  for (std::size_t pos = 0; pos < text.size();) {
    int len;
    const std::uint32_t cp = decode_utf8(text, pos, &len);
    pos += static_cast<std::size_t>(len);
    if (cp == kInvalidCodePoint || cp == 0 || cp == 0xFFFD || is_control(cp)) continue;
    if (is_bert_whitespace(cp) || is_python_space(cp)) {
      end_word();
    } else if (is_cjk_ideograph(cp)) {
      end_word();
      words.back().push_back(cp);
      end_word();
    } else {
      words.back().push_back(cp);
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

bool is_cjk_ideograph(std::uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::load(
    const std::string& vocab_path) {
  SPARQ_ASSIGN_OR_RETURN(const std::string text, read_file(vocab_path));
  std::unique_ptr<WordPieceTokenizer> tok(new WordPieceTokenizer());
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    while (!line.empty() &&
           std::string_view(" \t\r\f\v").find(line.back()) != std::string_view::npos)
      line.remove_suffix(1);
    while (!line.empty() &&
           std::string_view(" \t\r\f\v").find(line.front()) != std::string_view::npos)
      line.remove_prefix(1);
    const auto id = static_cast<std::uint32_t>(tok->tokens_.size());
    tok->tokens_.emplace_back(line);
    tok->ids_.emplace(std::string(line), id);  // a repeated token keeps its first id
  }
  if (tok->tokens_.empty()) return Status::error("{}: empty vocabulary", vocab_path);
  const auto special = [&](const char* name, std::uint32_t* id) -> Status {
    const long found = tok->token_id(name);
    if (found < 0) return Status::error("{}: vocabulary has no {} token", vocab_path, name);
    *id = static_cast<std::uint32_t>(found);
    return Status::ok();
  };
  SPARQ_RETURN_IF_ERROR(special("[PAD]", &tok->pad_id_));
  SPARQ_RETURN_IF_ERROR(special("[UNK]", &tok->unk_id_));
  SPARQ_RETURN_IF_ERROR(special("[CLS]", &tok->cls_id_));
  SPARQ_RETURN_IF_ERROR(special("[SEP]", &tok->sep_id_));
  SPARQ_RETURN_IF_ERROR(special("[MASK]", &tok->mask_id_));
  return tok;
}

long WordPieceTokenizer::token_id(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : static_cast<long>(it->second);
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(std::string_view text) const {
  std::vector<std::string> out;
  std::vector<std::uint32_t> lowered, decomposed, current;
  for (const auto& word : clean_and_split(text)) {
    lowered.clear();
    decomposed.clear();
    lower_case(word, &lowered);
    nfd(lowered, &decomposed);
    current.clear();
    for (const std::uint32_t cp : decomposed) {
      if (general_category(cp) == GC::kMn) continue;  // accent stripping
      if (is_punctuation(cp)) {
        if (!current.empty()) out.push_back(to_utf8(current));
        current.clear();
        out.push_back(to_utf8({cp}));
      } else {
        current.push_back(cp);
      }
    }
    if (!current.empty()) out.push_back(to_utf8(current));
  }
  return out;
}

void WordPieceTokenizer::wordpiece(const std::string& word, std::size_t num_chars,
                                   std::vector<std::uint32_t>* out) const {
  if (num_chars > kMaxWordChars) {
    out->push_back(unk_id_);
    return;
  }
  // Byte offsets of the code point boundaries, so candidates never split a character.
  std::vector<std::size_t> bounds;
  for (std::size_t pos = 0; pos < word.size();) {
    bounds.push_back(pos);
    int len;
    decode_utf8(word, pos, &len);
    pos += static_cast<std::size_t>(len);
  }
  bounds.push_back(word.size());
  const std::size_t first_out = out->size();
  std::string candidate;
  for (std::size_t start = 0; start + 1 < bounds.size();) {
    std::size_t end = bounds.size() - 1;
    long found = -1;
    for (; end > start; --end) {
      candidate = start > 0 ? "##" : "";
      candidate.append(word, bounds[start], bounds[end] - bounds[start]);
      found = token_id(candidate);
      if (found >= 0) break;
    }
    if (found < 0) {
      out->resize(first_out);
      out->push_back(unk_id_);
      return;
    }
    out->push_back(static_cast<std::uint32_t>(found));
    start = end;
  }
}

void WordPieceTokenizer::encode(std::string_view text, std::vector<std::uint32_t>* out) const {
  for (const std::string& word : basic_tokenize(text)) {
    std::size_t chars = 0;
    for (std::size_t pos = 0; pos < word.size(); ++chars) {
      int len;
      decode_utf8(word, pos, &len);
      pos += static_cast<std::size_t>(len);
    }
    wordpiece(word, chars, out);
  }
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::uint32_t> ids;
  encode(text, &ids);
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const std::uint32_t id : ids) out.push_back(tokens_[id]);
  return out;
}

std::string WordPieceTokenizer::decode(std::span<const std::uint32_t> ids) const {
  std::string text;
  for (const std::uint32_t id : ids) {
    SPARQ_CHECK(id < tokens_.size(), "token id {} out of range (vocab {})", id, tokens_.size());
    const std::string& t = tokens_[id];
    if (t.starts_with("##")) {
      text.append(t, 2);
    } else {
      if (!text.empty()) text.push_back(' ');
      text += t;
    }
  }
  return text;
}

}  // namespace sparq::data
