#include "train/json_subset.h"

#include <fmt/format.h>

#include <unordered_set>

namespace sparq::train {
namespace {

constexpr int kMaxJsonDepth = 8;
// Values in one document. A parsed value is a ~100-byte node, so a header of bare small
// numbers ("[0,0,0,...]", 2 bytes each) grew to about 50x its size: 4.8 GB for a 100 MiB
// header, killed by the OOM killer instead of refused (review, 2026-12-05). A real header
// has a few values per tensor: 2^20 covers 100k tensors.
constexpr std::size_t kMaxJsonValues = std::size_t{1} << 20;

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Recursive descent over the header text. Errors carry the byte offset in the header.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Result<Json> parse_document() {
    Json value;
    SPARQ_RETURN_IF_ERROR(parse_value(&value, 0));
    skip_space();
    if (pos_ != text_.size()) return fail("unexpected text after the top-level value");
    return value;
  }

 private:
  Status fail(std::string_view what) const {
    return Status::error("invalid JSON header at byte {}: {}", pos_, what);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Status parse_value(Json* out, int depth) {
    if (depth > kMaxJsonDepth) return fail("nested too deeply");
    if (++values_ > kMaxJsonValues) {
      return fail(fmt::format("more than {} values (a safetensors header has a few per tensor)",
                              kMaxJsonValues));
    }
    skip_space();
    if (pos_ >= text_.size()) return fail("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return parse_object(out, depth);
    if (c == '[') return parse_array(out, depth);
    if (c == '"') {
      out->kind = Json::Kind::kString;
      return parse_string(&out->str);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_int(out);
    return fail("expected an object, array, string or integer");
  }

  Status parse_object(Json* out, int depth) {
    out->kind = Json::Kind::kObject;
    ++pos_;  // '{'
    if (eat('}')) return Status::ok();
    // A set, not a scan of the members: a header of many entries must not take quadratic
    // time (100k entries took 39 s) before the loader gets to say what is wrong with it.
    std::unordered_set<std::string> keys;
    do {
      skip_space();
      std::string key;
      if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected a string key");
      SPARQ_RETURN_IF_ERROR(parse_string(&key));
      if (!eat(':')) return fail("expected ':'");
      Json value;
      SPARQ_RETURN_IF_ERROR(parse_value(&value, depth + 1));
      if (!keys.insert(key).second) return fail("duplicate key '" + key + "'");
      out->members.push_back({std::move(key), std::move(value)});
    } while (eat(','));
    if (!eat('}')) return fail("expected ',' or '}'");
    return Status::ok();
  }

  Status parse_array(Json* out, int depth) {
    out->kind = Json::Kind::kArray;
    ++pos_;  // '['
    if (eat(']')) return Status::ok();
    do {
      out->items.emplace_back();
      SPARQ_RETURN_IF_ERROR(parse_value(&out->items.back(), depth + 1));
    } while (eat(','));
    if (!eat(']')) return fail("expected ',' or ']'");
    return Status::ok();
  }

  Status parse_int(Json* out) {
    out->kind = Json::Kind::kInt;
    const bool negative = text_[pos_] == '-';
    if (negative) ++pos_;
    const std::size_t start = pos_;
    std::uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (v > (static_cast<std::uint64_t>(INT64_MAX) - 9) / 10) return fail("integer too large");
      v = v * 10 + static_cast<std::uint64_t>(text_[pos_++] - '0');
    }
    if (pos_ == start) return fail("expected digits");
    // JSON has no leading zeros ("02"); the format's reference loader refuses them (review).
    if (text_[start] == '0' && pos_ - start > 1) return fail("a leading zero in an integer");
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
      return fail("only integers are supported in safetensors headers");
    }
    out->num = negative ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
    return Status::ok();
  }

  Status parse_hex4(std::uint32_t* out) {
    if (text_.size() - pos_ < 4) return fail("truncated \\u escape");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      v <<= 4;
      const char* digits = "0123456789abcdef";
      const char* at = std::strchr(digits, h >= 'A' && h <= 'F' ? h - 'A' + 'a' : h);
      if (h == '\0' || at == nullptr) return fail("bad hex digit in \\u escape");
      v |= static_cast<std::uint32_t>(at - digits);
    }
    *out = v;
    return Status::ok();
  }

  Status parse_string(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return Status::ok();
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (pos_ >= text_.size()) return fail("unterminated escape");
      const char e = text_[pos_++];
      // The one-character escapes and what they stand for.
      constexpr std::string_view kEscapes = "\"\\/bfnrt", kMeanings = "\"\\/\b\f\n\r\t";
      if (const std::size_t k = kEscapes.find(e); k != std::string_view::npos) {
        *out += kMeanings[k];
        continue;
      }
      if (e != 'u') return fail("unknown escape");
      std::uint32_t cp = 0;
      SPARQ_RETURN_IF_ERROR(parse_hex4(&cp));
      if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate needs its low half
        std::uint32_t lo = 0;
        if (text_.substr(pos_, 2) != "\\u") return fail("unpaired surrogate in \\u escape");
        pos_ += 2;
        SPARQ_RETURN_IF_ERROR(parse_hex4(&lo));
        if (lo < 0xDC00 || lo >= 0xE000) return fail("unpaired surrogate in \\u escape");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp < 0xE000) {
        return fail("unpaired surrogate in \\u escape");
      }
      append_utf8(*out, cp);
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t values_ = 0;  // parsed so far, bounded by kMaxJsonValues
};

}  // namespace

std::string_view kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::kObject:
      return "an object";
    case Json::Kind::kArray:
      return "an array";
    case Json::Kind::kString:
      return "a string";
    case Json::Kind::kInt:
      return "an integer";
  }
  return "?";
}

Result<Json> parse_json(std::string_view text) { return JsonParser(text).parse_document(); }

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

}  // namespace sparq::train
