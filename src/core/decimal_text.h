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
// hexadecimal, inf, nan, beyond the type's largest value). A number too small for the type
// reads as its nearest value (0 or a subnormal), as strtod read it: from_chars calls it out of
// range, and "1e-50" for a float was refused as "not a finite number" (review, 2026-12-07).
template <typename T>
std::optional<T> parse_decimal(std::string_view text) {
  if (text.size() > 1 && text.front() == '+' && text[1] != '-' && text[1] != '+') {
    text.remove_prefix(1);
  }
  const char* const first = text.data();
  const char* const last = text.data() + text.size();
  T value{};
  const auto [end, ec] = std::from_chars(first, last, value, std::chars_format::general);
  if (text.empty() || end != last) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // A wider type tells underflow from overflow; past even its range, the text is refused.
    long double wide{};
    const auto [wide_end, wide_ec] = std::from_chars(first, last, wide, std::chars_format::general);
    if (wide_ec != std::errc() || wide_end != last || !(std::fabs(wide) < 1)) return std::nullopt;
    return static_cast<T>(wide);
  }
  if (ec != std::errc() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace sparq
