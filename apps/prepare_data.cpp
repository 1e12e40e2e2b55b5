// prepare_data: tokenizes text corpora into sparq token shards (format: src/data/shard.h,
// docs/data.md). Thin front end over sparq::data::prepare_shards.
//
//   prepare_data --tokenizer gpt2 --vocab-dir data/gpt2-bpe
//       --input data/wikitext-2/wiki.train.raw --out out/wt2
// (one split per run: the whole folder would put the test split into train.bin)
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/cli_args.h"
#include "core/fault.h"
#include "core/file_io.h"
#include "core/timer.h"
#include "data/corpus.h"
#include "data/markov_source.h"
#include "data/output_dir.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace {

// One progress bar line: `fraction` in [0, 1], then the details.
void print_bar(double fraction, const std::string& details, bool tty) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth + 0.5);
  const std::string line = fmt::format("[{}{}] {:5.1f}%  {}", std::string(filled, '#'),
                                       std::string(kWidth - filled, ' '), 100 * fraction, details);
  // On a terminal the bar redraws in place; in a log every update is its own line.
  std::fprintf(stderr, tty ? "\r%s" : "%s\n", line.c_str());
  std::fflush(stderr);
}

void print_progress(const sparq::data::PrepareProgress& p, bool tty) {
  // Clamped: a file that grows during the run must not make the bar overflow its width.
  const double mb = p.bytes_done / 1e6;
  print_bar(sparq::data::progress_fraction(p),
            fmt::format("{:.1f} MB  {} docs  {} tokens  {:.1f} MB/s", mb, p.documents, p.tokens,
                        p.seconds > 0 ? mb / p.seconds : 0.0),
            tty);
}

// --verify: validate shards (header, size, payload checksum) and describe them.
int verify_shards(const std::vector<std::string>& paths) {
  int failures = 0;
  for (const std::string& path : paths) {
    auto shard = sparq::data::ShardReader::open(path);
    if (!shard.is_ok()) {
      fmt::print(stderr, "prepare_data: {}\n", shard.status().message());
      ++failures;
      continue;
    }
    const auto& h = shard->header();
    fmt::print("{}: ok, {} tokens (u{}), {} documents, vocab {}, tokenizer {}, checksum {:016x}\n",
               path, h.token_count, 8 * h.token_width, h.document_count, h.vocab_size, h.tokenizer,
               h.payload_checksum);
  }
  return failures == 0 ? 0 : 1;
}

// 0 for a finished run, 1 when a SPARQ_FAULT spec never fired (fault::check_all_fired): a
// trial that injected nothing must not pass.
int exit_status_of_trial() {
  if (const sparq::Status fired = sparq::fault::check_all_fired(); !fired) {
    fmt::print(stderr, "prepare_data: {}\n", fired.message());
    return 1;
  }
  return 0;
}

// A validation split of this --name that this run did not write is from an earlier one and
// does not match the new shard.
void warn_stale_val(const sparq::data::PrepareOptions& options, bool wrote_val) {
  const std::string val = (std::filesystem::path(options.out_dir) /
                           (sparq::data::validation_stem(options.name) + ".bin"))
                              .string();
  std::error_code ec;
  if (!wrote_val && std::filesystem::exists(val, ec)) {
    fmt::print(stderr,
               "prepare_data: warning: '{}' is from an earlier run (this one wrote no "
               "validation split); remove it or rerun with --val-fraction\n",
               val);
  }
}

// --markov-tokens: a synthetic Markov-chain corpus with a known entropy rate.
// Progress: a line per 5% of the tokens (a bar redrawn in place on a terminal), as the text
// path has; 500M tokens take about a minute and printed nothing until the end (review,
// 2026-12-06).
// `chain` is main's, checked there: built once (its power iteration takes up to a minute at
// the largest context counts, and ran twice: review, 2026-12-06).
int write_markov(const sparq::data::MarkovConfig& config, const sparq::data::MarkovChain& chain,
                 std::uint64_t tokens, const sparq::data::PrepareOptions& options, bool quiet) {
  const auto fail = [](const std::string& message) {
    fmt::print(stderr, "prepare_data: {}\n", message);
    return 1;
  };
  const auto val_tokens = static_cast<std::uint64_t>(options.val_fraction * tokens);
  if (options.val_fraction > 0 && val_tokens == 0) {
    return fail(
        fmt::format("--val-fraction {} of {} tokens leaves {}.bin empty; raise --markov-tokens "
                    "or --val-fraction, or use --val-fraction 0",
                    options.val_fraction, tokens, sparq::data::validation_stem(options.name)));
  }
  // Declared before the writers: a failed run's folder, when this run made it, is removed
  // after they removed their temporaries.
  auto out_dir = sparq::data::OutputDirectory::create(options.out_dir);
  if (!out_dir.is_ok()) return fail(out_dir.status().message());
  const bool tty = isatty(fileno(stderr));
  const sparq::Stopwatch clock;
  std::uint64_t written = 0, next_report = tokens / 20;
  const auto report = [&] {
    if (quiet) return;
    const double seconds = clock.seconds();
    print_bar(static_cast<double>(written) / static_cast<double>(tokens),
              fmt::format("{} tokens  {:.1f} M tokens/s", written,
                          seconds > 0 ? static_cast<double>(written) / 1e6 / seconds : 0.0),
              tty);
  };
  // Train and validation come from independent streams of the same chain, and are
  // finished together so that a failure cannot pair a new train.bin with an old val.bin.
  const std::pair<std::string, std::uint64_t> splits[] = {
      {options.name, tokens - val_tokens},
      {sparq::data::validation_stem(options.name), val_tokens}};
  std::vector<sparq::data::ShardWriter> writers;
  writers.reserve(2);
  for (std::uint32_t stream = 0; stream < 2; ++stream) {
    const auto& [name, count] = splits[stream];
    if (count == 0) continue;
    const std::string path = (std::filesystem::path(options.out_dir) / (name + ".bin")).string();
    auto w = sparq::data::ShardWriter::create(path, "markov", config.vocab_size);
    if (!w.is_ok()) return fail(w.status().message());
    writers.push_back(std::move(*w));
    // A million tokens at a time, so memory does not grow with the shard (the whole split was
    // one vector: 4 bytes a token, 2 GB of RAM for --markov-tokens 500000000).
    sparq::data::MarkovSampler sampler(chain, stream);
    std::vector<std::uint32_t> piece;
    sparq::Status st;
    for (std::uint64_t done = 0; done < count && st; done += piece.size()) {
      piece.resize(static_cast<std::size_t>(std::min<std::uint64_t>(count - done, 1 << 20)));
      sampler.fill(piece);
      st = writers.back().append(piece);
      written += piece.size();
      if (written >= next_report || written == tokens) {  // the last piece ends at 100%
        report();
        next_report = written + tokens / 20;
      }
    }
    if (st) st = writers.back().add_documents(1);
    if (!st) return fail(st.message());
  }
  std::vector<sparq::data::ShardWriter*> order;
  for (auto& w : writers) order.push_back(&w);
  if (!quiet && tty) std::fprintf(stderr, "\n");
  if (const sparq::Status st = sparq::data::finish_together(order); !st) return fail(st.message());
  for (const auto& w : writers) fmt::print("{:<14} {} tokens\n", w.path(), w.token_count());
  for (const auto& w : writers) {
    for (const std::string& file : sparq::private_temporaries(w.path())) {
      fmt::print(stderr, "prepare_data: warning: {}\n",
                 sparq::data::describe_other_writers_temporary(file));
    }
  }
  warn_stale_val(options, val_tokens > 0);
  fmt::print("{}\n", chain.describe());
  return exit_status_of_trial();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokenize text corpora into sparq token shards"};
  std::string tokenizer_kind, vocab_dir, format = "auto";
  sparq::data::PrepareOptions options;
  std::vector<std::string> verify;
  app.add_option("--verify", verify, "only validate these shard files and print their headers");
  app.add_option("--tokenizer", tokenizer_kind, "gpt2 or wordpiece")
      ->check(CLI::IsMember({"gpt2", "wordpiece"}));
  app.add_option("--vocab-dir", vocab_dir,
                 "directory with encoder.json + vocab.bpe (gpt2) or vocab.txt (wordpiece); "
                 "default data/gpt2-bpe or data/bert-vocab");
  app.add_option("--input", options.inputs, "input files or directories (recursive, sorted)");
  app.add_option("--out", options.out_dir, "output directory");
  app.add_option("--name", options.name, "stem of the main shard file")->capture_default_str();
  app.add_option("--val-fraction", options.val_fraction,
                 "fraction of documents for the validation split, in [0, 1): val.bin beside "
                 "--name train, <name>.val.bin beside another name")
      ->capture_default_str();
  app.add_option("--format", format,
                 "auto, wikitext, lines (one document per line) or text (one per file)")
      ->capture_default_str();
  app.add_option("--threads", options.threads, "encoder threads (0: all cores)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  bool quiet = false;
  app.add_flag("--quiet", quiet, "no progress bar");
  sparq::data::MarkovConfig markov;
  std::uint64_t markov_tokens = 0;
  app.add_option("--markov-tokens", markov_tokens,
                 "instead of text: write this many tokens of a synthetic Markov chain")
      ->check(sparq::cli::non_negative_integer());
  app.add_option("--markov-vocab", markov.vocab_size, "Markov vocabulary size")
      ->capture_default_str();
  app.add_option("--markov-order", markov.order, "Markov order (context length)")
      ->capture_default_str();
  app.add_option("--markov-branching", markov.branching, "likely successors per context")
      ->capture_default_str();
  app.add_option("--markov-smoothing", markov.smoothing, "probability mass spread uniformly")
      ->capture_default_str();
  app.add_option("--seed", markov.seed, "seed of the Markov chain")
      ->check(sparq::cli::non_negative_integer())
      ->capture_default_str();
  SPARQ_PARSE_ARGS(app, argc, argv);  // Note [App exit codes] (core/cli_args.h)
  if (const sparq::Status fault = sparq::fault::check_job({.app = "prepare_data"}); !fault) {
    fmt::print(stderr, "prepare_data: {}\n", fault.message());  // before any file is written
    return 2;
  }
  if (!verify.empty()) {
    // --verify reads shards and writes nothing: any flag of the other modes would be dropped
    // without a word (`--verify t.bin --markov-tokens 5 --out d` exited 0, writing nothing;
    // review, 2026-12-06).
    for (const char* flag :
         {"--tokenizer", "--vocab-dir", "--input", "--out", "--name", "--val-fraction", "--format",
          "--threads", "--markov-tokens", "--markov-vocab", "--markov-order", "--markov-branching",
          "--markov-smoothing", "--seed"}) {
      if (app.count(flag) > 0) {
        fmt::print(stderr, "prepare_data: --verify only reads shards: {} does not apply\n", flag);
        return 2;
      }
    }
    return verify_shards(verify);
  }
  // Checked here for both paths (text and --markov-tokens): a fraction of 1 or more made the
  // Markov path's train count wrap around into a huge allocation.
  if (const sparq::Status split = sparq::data::check_split_options(options); !split.is_ok()) {
    fmt::print(stderr, "prepare_data: {}\n", split.message());
    return 2;
  }
  // Given as 0 it read as absent, and the refusal named the other --markov-* flags instead
  // (review, 2026-12-06).
  if (app.count("--markov-tokens") > 0 && markov_tokens == 0) {
    fmt::print(stderr, "prepare_data: --markov-tokens: must be > 0, got 0\n");
    return 2;
  }
  // Flags the chosen mode never reads are refused, not dropped (review, 2026-12-05).
  for (const char* flag :
       {"--markov-vocab", "--markov-order", "--markov-branching", "--markov-smoothing", "--seed"}) {
    if (markov_tokens == 0 && app.count(flag) > 0) {
      fmt::print(stderr, "prepare_data: {} applies only with --markov-tokens\n", flag);
      return 2;
    }
  }
  for (const char* flag : {"--format", "--vocab-dir", "--threads"}) {
    if (markov_tokens > 0 && app.count(flag) > 0) {
      fmt::print(stderr, "prepare_data: {} applies to text; --markov-tokens reads none\n", flag);
      return 2;
    }
  }
  std::optional<sparq::data::MarkovChain> chain;
  if (markov_tokens > 0) {  // bad chain settings are bad arguments: 2, before any file
    auto created = sparq::data::MarkovChain::create(markov);
    if (!created.is_ok()) {
      fmt::print(stderr, "prepare_data: --markov-*: {}\n", created.status().message());
      return 2;
    }
    chain.emplace(std::move(created).value());
  }
  if (markov_tokens > 0 && (!options.inputs.empty() || !tokenizer_kind.empty())) {
    // The text would be ignored without a word (review, 2026-12-05).
    fmt::print(stderr,
               "prepare_data: --markov-tokens generates synthetic tokens; it takes no --input "
               "or --tokenizer (tokenize text without --markov-tokens)\n");
    return 2;
  }
  if (markov_tokens > 0 && !options.out_dir.empty()) {
    return write_markov(markov, *chain, markov_tokens, options, quiet);
  }
  if (tokenizer_kind.empty() || options.inputs.empty() || options.out_dir.empty()) {
    fmt::print(stderr,
               "prepare_data: --tokenizer, --input and --out are required (or --verify, or "
               "--markov-tokens with --out); see --help\n");
    return 2;
  }

  if (vocab_dir.empty()) vocab_dir = tokenizer_kind == "gpt2" ? "data/gpt2-bpe" : "data/bert-vocab";
  auto fmt_result = sparq::data::parse_input_format(format);
  if (!fmt_result.is_ok()) {  // a bad argument: 2 (Note [App exit codes], core/cli_args.h)
    fmt::print(stderr, "prepare_data: {}\n", fmt_result.status().message());
    return 2;
  }
  options.format = fmt_result.value();
  auto tokenizer = sparq::data::load_tokenizer(tokenizer_kind, vocab_dir);
  if (!tokenizer.is_ok()) {
    fmt::print(stderr, "prepare_data: {}\n", tokenizer.status().message());
    return 1;
  }
  const bool tty = isatty(fileno(stderr));
  if (!quiet)
    options.on_progress = [tty](const sparq::data::PrepareProgress& p) { print_progress(p, tty); };
  auto summary = sparq::data::prepare_shards(**tokenizer, options);
  if (!quiet && tty) std::fprintf(stderr, "\n");
  if (!summary.is_ok()) {
    fmt::print(stderr, "prepare_data: {}\n", summary.status().message());
    return 1;
  }
  const auto& s = summary.value();
  constexpr std::size_t kWarningsShown = 10;
  for (std::size_t i = 0; i < std::min(s.warnings.size(), kWarningsShown); ++i) {
    fmt::print(stderr, "prepare_data: warning: {}\n", s.warnings[i]);
  }
  if (s.warnings.size() > kWarningsShown) {
    fmt::print(stderr, "prepare_data: warning: ... and {} more like these\n",
               s.warnings.size() - kWarningsShown);
  }
  warn_stale_val(options, !s.val_path.empty());
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  fmt::print("tokenizer      {} (vocab {})\n", (*tokenizer)->name(), (*tokenizer)->vocab_size());
  fmt::print("documents      {}\n", s.documents);
  if (s.empty_documents > 0)
    fmt::print("left out       {} documents with no tokens\n", s.empty_documents);
  fmt::print("input bytes    {}\n", s.bytes);
  fmt::print("{:<14} {} tokens, {} documents\n", s.train_path, s.train_tokens, s.train_documents);
  if (!s.val_path.empty())
    fmt::print("{:<14} {} tokens, {} documents\n", s.val_path, s.val_tokens, s.val_documents);
  fmt::print("tokens         {} ({:.3f} bytes/token)\n", s.train_tokens + s.val_tokens,
             static_cast<double>(s.bytes) /
                 static_cast<double>(std::max<std::uint64_t>(1, s.train_tokens + s.val_tokens)));
  fmt::print("seconds        {:.2f} ({:.2f} MB/s on {} threads)\n", s.seconds,
             s.bytes / 1e6 / std::max(s.seconds, 1e-9), threads);
  return exit_status_of_trial();
}
