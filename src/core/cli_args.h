// Command-line helpers shared by the apps (apps/*.cpp and train_main), header-only so that
// only what parses arguments depends on CLI11.
//
// Note [App exit codes]
// Every sparq app exits 0 on success (and for --help), 1 when its work fails, and 2 for bad
// command-line arguments. CLI11's own codes (105-114) would differ from app to app and say
// nothing a script can rely on, so parse errors are mapped to 2 (SPARQ_PARSE_ARGS).
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

namespace sparq::cli {

// A whole argument that is a decimal integer in [0, INT64_MAX]: CLI11's numeric checks take
// "12abc" against a range of doubles, and let "-5" into an unsigned option as 2^64 - 5.
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::int64_t value = -1;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return "'" + text + "' is too large";
        if (ec != std::errc() || ptr != end || value < 0) {
          return "'" + text + "' is not a non-negative integer";
        }
        return {};
      },
      "INT>=0");
}

}  // namespace sparq::cli

// Parses, or returns from the calling main() with Note [App exit codes]'s code.
#define SPARQ_PARSE_ARGS(app, argc, argv)        \
  try {                                          \
    (app).parse((argc), (argv));                 \
  } catch (const CLI::ParseError& parse_error) { \
    return (app).exit(parse_error) == 0 ? 0 : 2; \
  }
