// Decimal numbers from text, the same in every locale.
//
// Note [Locale-free numbers]
// std::strtod and std::strtof read the decimal separator of the C locale (LC_NUMERIC): a
// program embedding sparq that called setlocale(LC_ALL, "") in a comma-decimal locale (de_DE)
// had "compress.lbs.density: expected a number, got '0.01'" and "model key 'dropout': '0.1'
// is not a finite number" (review, 2026-12-07). std::from_chars ignores the locale. It also
// reads no leading blanks and no hexadecimal, which a YAML number is not either; a leading
// '+' (valid YAML) is taken here as strtod took it.
#pragma once

#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <system_error>

namespace sparq {

// The finite number `text` spells in full, or nothing (empty, trailing characters, blanks,
// hexadecimal, inf, nan, out of the type's range).
template <typename T>
std::optional<T> parse_decimal(std::string_view text) {
  if (text.size() > 1 && text.front() == '+' && text[1] != '-' && text[1] != '+') {
    text.remove_prefix(1);
  }
  T value{};
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace sparq
