// Note [Boolean words]: every boolean sparq reads from text (YAML config keys, `--set`
// values, model spec keys, compressor keys) accepts the same words, so a value that works in
// one place works in all: true / yes / on / y / 1 and false / no / off / n / 0, each in lower
// case, Capitalised or UPPER CASE (YAML 1.1's words, which yaml-cpp accepted for config keys,
// plus 1 and 0, which the model and compressor keys accepted). They used to be three rules:
// `on` failed for a compressor key, `1` for a config key (review, 2026-12-05).
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace sparq {

inline std::optional<bool> parse_bool_word(std::string_view text) {
  static constexpr std::array<std::string_view, 12> kTrue = {
      "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y", "1"};
  static constexpr std::array<std::string_view, 12> kFalse = {
      "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N", "0"};
  for (std::string_view w : kTrue) {
    if (text == w) return true;
  }
  for (std::string_view w : kFalse) {
    if (text == w) return false;
  }
  return std::nullopt;
}

// For error messages: the words, briefly.
inline constexpr std::string_view kBoolWords = "true/false, yes/no, y/n, on/off, 1/0";

}  // namespace sparq
