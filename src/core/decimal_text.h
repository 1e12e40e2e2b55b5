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
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

namespace sparq {

// Whether the decimal `text` (sign, digits, '.', exponent; already read by from_chars) is
// below 1 in magnitude: its first significant digit's power of ten is negative. Tells an
// underflow from an overflow without a wider type.
inline bool decimal_below_one(std::string_view text) {
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.remove_prefix(1);
  const std::size_t e = text.find_first_of("eE");
  const std::string_view mantissa = text.substr(0, e);
  long long exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view digits = text.substr(e + 1);
    const bool negative = !digits.empty() && digits.front() == '-';
    if (!digits.empty() && (digits.front() == '-' || digits.front() == '+'))
      digits.remove_prefix(1);
    for (const char c : digits) {  // saturates: only its sign matters past a few thousand
      if (exponent < 1000000) exponent = exponent * 10 + (c - '0');
    }
    if (negative) exponent = -exponent;
  }
  const std::size_t point = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, point);
  const std::size_t first = whole.find_first_not_of('0');
  long long order = 0;  // the power of ten of the first significant digit, before the exponent
  if (first != std::string_view::npos) {
    order = static_cast<long long>(whole.size() - first) - 1;
  } else {
    const std::string_view fraction =
        point == std::string_view::npos ? std::string_view() : mantissa.substr(point + 1);
    const std::size_t nonzero = fraction.find_first_not_of('0');
    if (nonzero == std::string_view::npos) return true;  // zero
    order = -static_cast<long long>(nonzero) - 1;
  }
  return order + exponent < 0;
}

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
    if (!decimal_below_one(text)) return std::nullopt;  // too large
    // A wider type gives the nearest subnormal where there is one; else it is a signed zero.
    if constexpr (std::numeric_limits<long double>::min_exponent10 <
                  std::numeric_limits<T>::min_exponent10 - 20) {
      long double wide{};
      const auto [wide_end, wide_ec] =
          std::from_chars(first, last, wide, std::chars_format::general);
      if (wide_ec == std::errc() && wide_end == last) return static_cast<T>(wide);
    }
    return text.front() == '-' ? -T{0} : T{0};
  }
  if (ec != std::errc() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace sparq
