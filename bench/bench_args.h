// Strict number arguments for the benchmarks that parse their command line by hand
// (bench_comm, bench_layers, bench_attention, bench_gemm's --threads list): the whole word must be
// the number, and a refusal names the flag and the word. atoi/strtoull read "abc" as 0 and "12abc"
// as 12, and a run went on with a thread count of 0 or a size the user never asked for (review,
// 2026-12-06).
#pragma once

#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace sparq::bench {

// A whole number >= `min`, or nothing.
inline std::optional<long long> whole_arg(std::string_view text, long long min) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min) return {};
  return value;
}

// A finite number > 0, or nothing.
inline std::optional<double> positive_arg(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !(value > 0) || value > 1e300) {
    return {};
  }
  return value;
}

// Prints "<program>: <flag> '<text>': expected <want>" and returns 2 (bad arguments).
inline int refuse_arg(const char* program, std::string_view flag, std::string_view text,
                      const char* want) {
  std::fprintf(stderr, "%s: %.*s '%.*s': expected %s\n", program, static_cast<int>(flag.size()),
               flag.data(), static_cast<int>(text.size()), text.data(), want);
  return 2;
}

}  // namespace sparq::bench
