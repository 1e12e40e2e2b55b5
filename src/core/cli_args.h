// Command-line helpers shared by the apps (apps/*.cpp and train_main), header-only so that
// only what parses arguments depends on CLI11.
//
// Note [App exit codes]
// Every sparq app exits 0 on success (and for --help), 1 when its work fails, and 2 for bad
// command-line arguments. CLI11's own codes (105-114) would differ from app to app and say
// nothing a script can rely on, so parse errors are mapped to 2 (SPARQ_PARSE_ARGS).
//
// Note [One report of a bad argument]
// Under mpirun every rank parses the same command line before MPI starts, so a bad argument
// was printed once per rank, unlike every other error (docs/reliability.md, "One line per
// error"; review, 2026-12-07). The launcher's rank variables name rank 0 before MPI_Init:
// only it prints an argument error (and --help); every rank exits with the same code. The
// limit: a rank whose arguments differ from rank 0's (an MPMD launch, a variable unset on
// some nodes) reports its bad argument by its exit status 2 alone, which mpirun names. The
// other ranks wait 2 s before they exit: the first rank to exit with an error makes mpirun end
// the job, and when it was a silent one, rank 0 was killed before it printed (CI, 2026-12-07).
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace sparq::cli {

// Whether this process prints argument errors (Note [One report of a bad argument]): rank 0
// of a launcher that says (Open MPI, MPICH and PMIx, Slurm), or a process no launcher started.
inline bool reports_argument_errors() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* rank = std::getenv(name); rank != nullptr && *rank != '\0') {
      return std::string_view(rank) == "0";
    }
  }
  return true;
}

// The exit status of an argument error, after Note [One report of a bad argument]'s wait on
// the ranks that do not report it.
inline int argument_error_exit(int code) {
  if (!reports_argument_errors()) std::this_thread::sleep_for(std::chrono::seconds(2));
  return code;
}

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

// Note [Decimal integers]
// CLI11 2.1 converts an integer option's text with strtoll(text, 0), which reads a leading
// zero as octal and "0x" as hexadecimal: `train --stop-at 010` stopped at step 8, and
// `prepare_data --seed 0755` drew seed 493 (review, 2026-12-06). Every integer option of an
// app (its type name INT or UINT) gets decimal_integer_text as its first transform
// (SPARQ_PARSE_ARGS): leading zeros are dropped ("010" is 10), another base is refused.
inline std::string decimal_integer_text(std::string& text) {
  if (text.empty()) return {};  // CLI11 refuses it as a number itself
  const std::size_t digits = text[0] == '+' || text[0] == '-' ? 1 : 0;
  if (text.size() > digits + 1 && text[digits] == '0') {
    if (text.find_first_not_of("0123456789", digits) != std::string::npos) {
      return "'" + text + "' is not a decimal integer";
    }
    const std::size_t first = text.find_first_not_of('0', digits);
    text.erase(digits, (first == std::string::npos ? text.size() - 1 : first) - digits);
  }
  return {};
}

inline void decimal_integer_options(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) {
      option->transform(CLI::Validator(decimal_integer_text, ""));
    }
  }
}

// Note [Empty option values]
// An option given an empty value (`--resume "$CKPT"` with CKPT unset) was taken as not given:
// train started afresh and set the checkpoints it was asked to resume aside, and `--config ""`
// said "cannot open config file ''" (review, 2026-12-07). Every text option of an app (type
// name TEXT) refuses an empty value as a bad argument (SPARQ_PARSE_ARGS); no app has an option
// whose empty value means something, and one that did would need a way out of this rule
// (CLI11's checks all apply: its own could not undo this one).
inline void refuse_empty_text_options(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_name().rfind("TEXT", 0) != 0) continue;
    option->check(CLI::Validator(
        [](std::string& text) {
          return text.empty() ? std::string("an empty value (an unset shell variable?)")
                              : std::string();
        },
        ""));
  }
}

// The first item of a comma-separated option's list that comes twice, or "": a repeat ran or
// printed its rows twice (bench_gemm summed a repeated model's step twice; simulate printed a
// repeated world size's rows twice: review, 2026-12-07), so the apps refuse it.
inline std::string first_repeated(const std::vector<std::string>& items) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (items[j] == items[i]) return items[i];
    }
  }
  return "";
}

// CLI11's report of arguments no option takes read "The following arguments were not
// expected: 10 --steps", the arguments in reverse order, and said nothing of --set, which is
// how a config key is changed (review, 2026-12-08). Other errors are CLI11's own.
inline std::string failure_message(const CLI::App* app, const CLI::Error& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) {
    return CLI::FailureMessage::simple(app, e);
  }
  std::string extras;
  for (const std::string& item : app->remaining()) extras += (extras.empty() ? "" : " ") + item;
  const std::string& path = app->get_name();
  const std::string name = path.substr(path.find_last_of('/') + 1);  // argv[0]'s file name
  std::string text =
      name + ": error: unexpected argument(s): " + extras + " (--help lists the options";
  if (app->get_option_no_throw("--set") != nullptr) {
    text += "; a config key is set with --set KEY=VALUE, e.g. --set train.steps=10";
  }
  return text + ")\n";
}

}  // namespace sparq::cli

// Parses, or returns from the calling main() with Note [App exit codes]'s code; integer
// options read as decimal (Note [Decimal integers]), text options refuse an empty value (Note
// [Empty option values]), and only one rank reports (Note [One report of a bad argument]).
#define SPARQ_PARSE_ARGS(app, argc, argv)                           \
  try {                                                             \
    sparq::cli::decimal_integer_options(app);                       \
    sparq::cli::refuse_empty_text_options(app);                     \
    (app).failure_message(sparq::cli::failure_message);             \
    (app).parse((argc), (argv));                                    \
  } catch (const CLI::ParseError& parse_error) {                    \
    if (sparq::cli::reports_argument_errors()) {                    \
      return (app).exit(parse_error) == 0 ? 0 : 2;                  \
    }                                                               \
    std::ostringstream unprinted;                                   \
    const int code = (app).exit(parse_error, unprinted, unprinted); \
    return sparq::cli::argument_error_exit(code == 0 ? 0 : 2);      \
  }
