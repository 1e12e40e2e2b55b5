#include "data/gpt2_tokenizer.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "core/check.h"
#include "core/file_io.h"
#include "data/gpt2_pretokenize.h"
#include "data/unicode.h"

namespace sparq::data {
namespace {

// Parser for encoder.json: one flat JSON object of string keys and non-negative integers.
class VocabJsonParser {
 public:
  VocabJsonParser(std::string_view text, std::string path) : s_(text), path_(std::move(path)) {}

  Status parse(const std::function<Status(std::string, std::uint64_t)>& on_entry) {
    skip_ws();
    if (!eat('{')) return fail("expected '{'");
    skip_ws();
    if (eat('}')) return end_of_input();
    while (true) {
      std::string key;
      SPARQ_RETURN_IF_ERROR(parse_string(&key));
      skip_ws();
      if (!eat(':')) return fail("expected ':'");
      skip_ws();
      std::uint64_t value = 0;
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail("expected an id");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        value = value * 10 + static_cast<std::uint64_t>(s_[pos_++] - '0');
        if (value > std::numeric_limits<std::uint32_t>::max()) return fail("id out of range");
      }
      SPARQ_RETURN_IF_ERROR(on_entry(std::move(key), value));
      skip_ws();
      if (eat('}')) return end_of_input();
      if (!eat(',')) return fail("expected ',' or '}'");
      skip_ws();
    }
  }

  // "path:line" of the current position, for messages (computed only on errors).
  std::string location() const {
    const auto line =
        1 + std::count(s_.begin(), s_.begin() + static_cast<std::ptrdiff_t>(pos_), '\n');
    return fmt::format("{}:{}", path_, line);
  }

 private:
  // Only whitespace may follow the object: a second object appended to the file (added
  // tokens) was dropped without a word (review, 2026-12-06).
  Status end_of_input() {
    skip_ws();
    return pos_ == s_.size() ? Status::ok() : fail("text after the closing '}'");
  }
  Status fail(const char* what) const {
    return Status::error("{}: malformed encoder.json at byte {}: {}", location(), pos_, what);
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      ++pos_;
  }
  Result<std::uint32_t> hex4() {
    if (pos_ + 4 > s_.size()) return fail("truncated \\u escape");
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[pos_++];
      const int d = (c >= '0' && c <= '9')                   ? c - '0'
                    : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                             : -1;
      if (d < 0) return fail("bad hex digit in \\u escape");
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return v;
  }
  Status parse_string(std::string* out) {
    if (!eat('"')) return fail("expected a string");
    while (pos_ < s_.size() && s_[pos_] != '"') {
      const char c = s_[pos_++];
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          SPARQ_ASSIGN_OR_RETURN(std::uint32_t cp, hex4());
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // surrogate pair
            if (!eat('\\') || !eat('u')) return fail("unpaired surrogate");
            SPARQ_ASSIGN_OR_RETURN(std::uint32_t low, hex4());
            if (low < 0xDC00 || low > 0xDFFF) return fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(cp, out);
          break;
        }
        default:
          return fail("unknown escape");
      }
    }
    if (!eat('"')) return fail("unterminated string");
    return Status::ok();
  }

  std::string_view s_;
  std::string path_;
  std::size_t pos_ = 0;
};

// Converts a vocab-file token (UTF-8 in the byte-to-unicode alphabet) to raw bytes.
Result<std::string> unicode_token_to_bytes(std::string_view token,
                                           const std::unordered_map<std::uint32_t, char>& decoder) {
  std::string bytes;
  for (std::size_t pos = 0; pos < token.size();) {
    int len;
    const std::uint32_t cp = decode_utf8(token, pos, &len);
    const auto it = decoder.find(cp);
    if (it == decoder.end()) {
      return Status::error("token '{}' has a character (U+{:04X}) outside GPT-2's byte alphabet",
                           token, cp);
    }
    bytes.push_back(it->second);
    pos += static_cast<std::size_t>(len);
  }
  return bytes;
}

}  // namespace

std::array<std::uint32_t, 256> gpt2_byte_to_unicode() {
  std::array<std::uint32_t, 256> table{};
  std::uint32_t next = 256;
  for (std::uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? b : next++;
  }
  return table;
}

Result<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::load(const std::string& encoder_json_path,
                                                           const std::string& vocab_bpe_path) {
  std::unique_ptr<Gpt2Tokenizer> tok(new Gpt2Tokenizer());
  std::unordered_map<std::uint32_t, char> decoder;
  const auto byte_table = gpt2_byte_to_unicode();
  for (int b = 0; b < 256; ++b) decoder[byte_table[b]] = static_cast<char>(b);

  SPARQ_ASSIGN_OR_RETURN(const std::string json, read_file(encoder_json_path));
  std::vector<bool> seen;
  VocabJsonParser parser(json, encoder_json_path);
  SPARQ_RETURN_IF_ERROR(parser.parse([&](std::string key, std::uint64_t id) -> Status {
    auto bytes = unicode_token_to_bytes(key, decoder);
    if (!bytes) return bytes.status().with_context(parser.location());
    if (id >= (1u << 24))
      return Status::error("{}: id {} of '{}' is implausibly large", parser.location(), id, key);
    if (id >= tok->id_to_bytes_.size()) {
      tok->id_to_bytes_.resize(id + 1);
      seen.resize(id + 1, false);
    }
    if (seen[id]) return Status::error("{}: id {} is used twice", parser.location(), id);
    seen[id] = true;
    if (!tok->bytes_to_id_.emplace(*bytes, static_cast<std::uint32_t>(id)).second) {
      return Status::error("{}: token '{}' appears twice", parser.location(), key);
    }
    tok->id_to_bytes_[id] = std::move(*bytes);
    return Status::ok();
  }));
  for (std::size_t id = 0; id < seen.size(); ++id) {
    if (!seen[id])
      return Status::error("{}: ids are not contiguous (id {} is missing)", encoder_json_path, id);
  }
  for (int b = 0; b < 256; ++b) {
    const long id = tok->token_id(std::string(1, static_cast<char>(b)));
    if (id < 0) return Status::error("{}: no token for byte {}", encoder_json_path, b);
    tok->byte_ids_[b] = static_cast<std::uint32_t>(id);
  }
  const long eot = tok->token_id(kEndOfText);
  if (eot < 0) return Status::error("{}: no {} token", encoder_json_path, kEndOfText);
  tok->eot_id_ = static_cast<std::uint32_t>(eot);

  SPARQ_ASSIGN_OR_RETURN(const std::string bpe, read_file(vocab_bpe_path));
  std::size_t line_start = 0, line_no = 0;
  std::uint32_t rank = 0;
  const auto where = [&] { return fmt::format("{}:{}", vocab_bpe_path, line_no); };
  while (line_start < bpe.size()) {
    std::size_t line_end = bpe.find('\n', line_start);
    if (line_end == std::string::npos) line_end = bpe.size();
    std::string_view line(bpe.data() + line_start, line_end - line_start);
    line_start = line_end + 1;
    ++line_no;
    // A CRLF checkout: the '\r' is not part of the second token.
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line_no == 1 && line.starts_with("#version")) continue;
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size()) {
      return Status::error("{}: expected two tokens separated by a space", where());
    }
    auto left = unicode_token_to_bytes(line.substr(0, space), decoder);
    if (!left) return left.status().with_context(where());
    auto right = unicode_token_to_bytes(line.substr(space + 1), decoder);
    if (!right) return right.status().with_context(where());
    const long a = tok->token_id(*left), b = tok->token_id(*right);
    const long m = tok->token_id(*left + *right);
    if (a < 0 || b < 0 || m < 0) {
      return Status::error("{}: merge '{}' uses a token missing from {}", where(), line,
                           encoder_json_path);
    }
    const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint64_t>(b);
    // encoder.py builds its rank dict from the list, so a repeated pair keeps its last rank.
    tok->merges_.insert_or_assign(key, MergeInfo{rank++, static_cast<std::uint32_t>(m)});
  }
  if (tok->merges_.empty()) return Status::error("{}: no merges found", vocab_bpe_path);
  // Every token but the 256 bytes and special tokens (<|endoftext|>, and any other spelt <...>:
  // <pad>, <mask>, added to a vocabulary, encode as plain text like <|endoftext|> does) is some
  // merge's result: a merges file cut short (a truncated download) or of another vocabulary
  // left tokens no text could produce, and was accepted; its shards' ids were then not GPT-2's
  // (review, 2026-12-07).
  std::vector<bool> made(seen.size(), false);
  for (const auto& [pair, info] : tok->merges_) made[info.merged] = true;
  for (int b = 0; b < 256; ++b) made[tok->byte_ids_[b]] = true;
  for (std::size_t id = 0; id < made.size(); ++id) {
    const std::string& bytes = tok->id_to_bytes_[id];
    if (bytes.size() >= 3 && bytes.front() == '<' && bytes.back() == '>') made[id] = true;
  }
  const auto unmade = static_cast<std::size_t>(std::count(made.begin(), made.end(), false));
  if (unmade > 0) {
    const auto first =
        static_cast<std::uint32_t>(std::find(made.begin(), made.end(), false) - made.begin());
    return Status::error(
        "{}: {} of the {} tokens of {} are made by no merge (the first: id {}): the merges file "
        "is cut short or belongs to another vocabulary",
        vocab_bpe_path, unmade, seen.size(), encoder_json_path, first);
  }
  return tok;
}

long Gpt2Tokenizer::token_id(std::string_view bytes) const {
  const auto it = bytes_to_id_.find(std::string(bytes));
  return it == bytes_to_id_.end() ? -1 : static_cast<long>(it->second);
}

struct Gpt2Tokenizer::LocalCache final : EncodeCache {
  static constexpr std::size_t kMaxEntries = 1 << 20;
  std::unordered_map<std::string, std::vector<std::uint32_t>, PieceHash, std::equal_to<>> map;
};

std::unique_ptr<EncodeCache> Gpt2Tokenizer::new_cache() const {
  return std::make_unique<LocalCache>();
}

void Gpt2Tokenizer::merge(std::string_view piece, std::vector<std::uint32_t>* word) const {
  if (piece.size() > kLongPiece) {
    merge_long(piece, word);
  } else {
    merge_rounds(piece, word);
  }
}

void Gpt2Tokenizer::merge_rounds(std::string_view piece, std::vector<std::uint32_t>* word) const {
  word->clear();
  for (const char c : piece) word->push_back(byte_ids_[static_cast<std::uint8_t>(c)]);
  std::vector<std::uint32_t> next;
  while (word->size() > 1) {
    // The lowest-ranked adjacent pair; merge every occurrence of it, left to right.
    const std::vector<std::uint32_t>& w = *word;
    std::uint32_t best_rank = std::numeric_limits<std::uint32_t>::max(), merged = 0;
    std::uint32_t first = 0, second = 0;
    for (std::size_t i = 0; i + 1 < w.size(); ++i) {
      const auto it = merges_.find((static_cast<std::uint64_t>(w[i]) << 32) | w[i + 1]);
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank, merged = it->second.merged;
        first = w[i], second = w[i + 1];
      }
    }
    if (best_rank == std::numeric_limits<std::uint32_t>::max()) break;
    next.clear();
    for (std::size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == first && w[i + 1] == second) {
        next.push_back(merged);
        i += 2;
      } else {
        next.push_back(w[i++]);
      }
    }
    word->swap(next);
  }
}

void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<std::uint32_t>* out,
                        EncodeCache* local) const {
  if (local != nullptr) {
    auto& map = static_cast<LocalCache*>(local)->map;
    auto it = map.find(piece);
    if (it == map.end()) {
      if (map.size() >= LocalCache::kMaxEntries) map.clear();  // bound the memory
      std::vector<std::uint32_t> word;
      merge(piece, &word);
      it = map.emplace(std::string(piece), std::move(word)).first;
    }
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  // Stripe by the high bits so that the stripe and the bucket inside it use different bits.
  CacheStripe& stripe = cache_[(PieceHash{}(piece) >> 48) % kCacheStripes];
  {
    std::lock_guard<std::mutex> lock(stripe.mutex);
    const auto it = stripe.map.find(piece);
    if (it != stripe.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::uint32_t> word;
  merge(piece, &word);
  out->insert(out->end(), word.begin(), word.end());
  std::lock_guard<std::mutex> lock(stripe.mutex);
  if (stripe.map.size() >= kMaxEntriesPerStripe) stripe.map.clear();  // bound the memory
  stripe.map.emplace(std::string(piece), std::move(word));
}

void Gpt2Tokenizer::encode(std::string_view text, std::vector<std::uint32_t>* out) const {
  encode_cached(text, out, nullptr);
}

void Gpt2Tokenizer::encode_cached(std::string_view text, std::vector<std::uint32_t>* out,
                                  EncodeCache* cache) const {
  std::vector<PieceSpan> pieces;
  gpt2_pretokenize(text, &pieces);
  for (const PieceSpan& p : pieces) bpe(text.substr(p.begin, p.end - p.begin), out, cache);
}

void Gpt2Tokenizer::encode_with_special(std::string_view text,
                                        std::vector<std::uint32_t>* out) const {
  const std::string_view eot(kEndOfText);
  std::size_t start = 0;
  while (true) {
    const std::size_t hit = text.find(eot, start);
    encode(text.substr(start, hit == std::string_view::npos ? std::string_view::npos : hit - start),
           out);
    if (hit == std::string_view::npos) break;
    out->push_back(eot_id_);
    start = hit + eot.size();
  }
}

std::string Gpt2Tokenizer::decode(std::span<const std::uint32_t> ids) const {
  std::string text;
  for (const std::uint32_t id : ids) {
    SPARQ_CHECK(id < id_to_bytes_.size(), "token id {} out of range (vocab {})", id,
                id_to_bytes_.size());
    text += id_to_bytes_[id];
  }
  return text;
}

}  // namespace sparq::data
