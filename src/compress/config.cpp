#include "compress/config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/bool_words.h"
#include "core/decimal_text.h"

namespace sparq::compress {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

const std::string* ConfigReader::lookup(const std::string& key) {
  used_.insert(key);
  auto it = params_.find(key);
  return it == params_.end() ? nullptr : &it->second;
}

Result<double> ConfigReader::real(const std::string& key, double fallback, double lo, double hi,
                                  bool lo_open) {
  const std::string* text = lookup(key);
  double value = fallback;
  if (text) {
    // Decimal text only, in every locale (Note [Locale-free numbers], core/decimal_text.h):
    // no hexadecimal ("0x1p-7") and no leading blanks, which a YAML number is not and optim.*
    // refuses (review, 2026-12-06).
    const std::optional<double> parsed = parse_decimal<double>(*text);
    if (!parsed) return Status::error("{}: expected a number, got '{}'", full_key(key), *text);
    value = *parsed;
  }
  const bool below = lo_open ? !(value > lo) : !(value >= lo);
  if (below || !(value <= hi)) {
    return Status::error("{}: must be in {}{}, {}], got {}", full_key(key), lo_open ? "(" : "[",
                         lo, hi, value);
  }
  return value;
}

Result<std::int64_t> ConfigReader::integer(const std::string& key, std::int64_t fallback,
                                           std::int64_t lo, std::int64_t hi) {
  const std::string* text = lookup(key);
  std::int64_t value = fallback;
  if (text) {
    const char* first = text->data();
    const char* last = first + text->size();
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (text->empty() || ec != std::errc() || ptr != last) {
      return Status::error("{}: expected an integer, got '{}'", full_key(key), *text);
    }
  }
  if (value < lo || value > hi) {
    return Status::error("{}: must be in [{}, {}], got {}", full_key(key), lo, hi, value);
  }
  return value;
}

Result<std::int64_t> ConfigReader::integer_in(const std::string& key, std::int64_t fallback,
                                              const std::vector<std::int64_t>& allowed) {
  SPARQ_ASSIGN_OR_RETURN(std::int64_t value,
                         integer(key, fallback, INT64_MIN, INT64_MAX));
  for (std::int64_t a : allowed) {
    if (a == value) return value;
  }
  std::vector<std::string> names;
  for (std::int64_t a : allowed) names.push_back(std::to_string(a));
  return Status::error("{}: must be one of {{{}}}, got {}", full_key(key), join(names), value);
}

Result<std::string> ConfigReader::choice(const std::string& key, const std::string& fallback,
                                         const std::vector<std::string>& allowed) {
  const std::string* text = lookup(key);
  const std::string value = text ? *text : fallback;
  for (const auto& a : allowed) {
    if (a == value) return value;
  }
  return Status::error("{}: must be one of {{{}}}, got '{}'", full_key(key), join(allowed), value);
}

Result<bool> ConfigReader::boolean(const std::string& key, bool fallback) {
  const std::string* text = lookup(key);
  if (!text) return fallback;
  if (const std::optional<bool> value = parse_bool_word(*text))
    return *value;  // Note [Boolean words]
  return Status::error("{}: expected a boolean ({}), got '{}'", full_key(key), kBoolWords, *text);
}

Status ConfigReader::removed(const std::string& key, const std::string& instead) {
  if (!params_.count(key)) return Status::ok();
  return Status::error("{}: this key was removed; {}", full_key(key), instead);
}

Status ConfigReader::finish() const {
  if (check_declared_) {
    for (const std::string& key : used_) {
      if (!declared_.count(key)) {
        return Status::error("{}: the compressor reads key '{}', which its registration does not "
                             "declare (add it to CompressorRegistration::keys)",
                             prefix_, key);
      }
    }
  }
  const std::set<std::string>& known_keys = check_declared_ ? declared_ : used_;
  for (const auto& [key, value] : params_) {
    if (!used_.count(key)) {
      std::vector<std::string> known(known_keys.begin(), known_keys.end());
      return Status::error("{}: unknown key (known keys: {})", full_key(key),
                           known.empty() ? std::string("none") : join(known));
    }
  }
  return Status::ok();
}

}  // namespace sparq::compress
