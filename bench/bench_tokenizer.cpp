// Tokenizer encode throughput in MB/s on real text, next to two references measured in the
// same run on the same bytes: a plain UTF-8 decoding scan (a floor for any tokenizer) and
// GPT-2 pre-tokenization alone (the regex part of the encoder, without BPE).
//
//   bench_tokenizer [--text FILE] [--gpt2-dir DIR] [--bert-dir DIR] [--threads N]
// Defaults point at ../shared/data (WikiText-2 validation, GPT-2 and BERT vocabularies).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <filesystem>
#include <thread>

#include "core/cli_args.h"
#include "core/file_io.h"
#include "core/timer.h"
#include "data/gpt2_pretokenize.h"
#include "data/tokenizer.h"
#include "data/unicode.h"

namespace {

// Best of `reps` timings of fn over the text, in MB/s.
template <typename Fn>
double mb_per_s(const std::string& text, int reps, Fn&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    sparq::Stopwatch sw;
    fn();
    best = std::min(best, sw.seconds());
  }
  return text.size() / 1e6 / best;
}

// Encodes the text split into lines on one thread per cache, each thread using its own
// cache (what prepare_data does).
std::size_t encode_threaded(const sparq::data::Tokenizer& tok,
                            const std::vector<std::string_view>& lines,
                            const std::vector<std::unique_ptr<sparq::data::EncodeCache>>& caches) {
  const int threads = static_cast<int>(caches.size());
  std::atomic<std::size_t> next{0}, tokens{0};
  auto work = [&](sparq::data::EncodeCache* cache) {
    std::vector<std::uint32_t> ids;
    for (std::size_t i; (i = next.fetch_add(64)) < lines.size();) {
      for (std::size_t k = i; k < std::min(lines.size(), i + 64); ++k) {
        ids.clear();
        tok.encode_cached(lines[k], &ids, cache);
        tokens += ids.size();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, caches[t].get());
  work(caches[0].get());
  for (auto& th : pool) th.join();
  return tokens;
}

// GPT-2 pre-tokenization of the lines on `threads` threads, shared out as encode_threaded
// does: the reference of the N-thread rows, whose ratio to a one-thread reference grew with
// the core count (review, 2026-12-07).
void pretokenize_threaded(const std::vector<std::string_view>& lines, int threads) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    std::vector<sparq::data::PieceSpan> pieces;
    for (std::size_t i; (i = next.fetch_add(64)) < lines.size();) {
      for (std::size_t k = i; k < std::min(lines.size(), i + 64); ++k) {
        pieces.clear();
        sparq::data::gpt2_pretokenize(lines[k], &pieces);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string shared =
      std::filesystem::path(SPARQ_BENCH_SOURCE_DIR).parent_path().string() + "/shared/data";
  std::string text_path = shared + "/wikitext-2/wiki.valid.raw";
  std::string gpt2_dir = shared + "/gpt2-bpe", bert_dir = shared + "/bert-vocab";
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App app{"Tokenizer encode throughput"};
  app.add_option("--text", text_path, "UTF-8 text to encode")->capture_default_str();
  app.add_option("--gpt2-dir", gpt2_dir, "encoder.json + vocab.bpe")->capture_default_str();
  app.add_option("--bert-dir", bert_dir, "WordPiece vocab.txt")->capture_default_str();
  app.add_option("--threads", threads, "threads for the parallel row")
      ->check(CLI::Range(1, 4096))  // 0 or fewer crashed (review, 2026-12-06)
      ->capture_default_str();
  SPARQ_PARSE_ARGS(app, argc, argv);  // Note [App exit codes], Note [Decimal integers]

  auto text = sparq::read_file(text_path);
  if (!text.is_ok()) {
    fmt::print(stderr, "bench_tokenizer: {} (pass --text)\n", text.status().message());
    return 1;
  }
  const std::string& s = text.value();
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < s.size();) {
    // A last line without '\n': npos + 1 wrapped to 0, and the loop never ended (review).
    const std::size_t newline = s.find('\n', pos);
    const std::size_t end = newline == std::string::npos ? s.size() : newline + 1;
    lines.emplace_back(s.data() + pos, end - pos);
    pos = end;
  }
  fmt::print("text: {} ({:.2f} MB, {} lines)\n\n", text_path, s.size() / 1e6, lines.size());
  // Each encoder row's speed is also given as a ratio to the pre-tokenization reference
  // measured again right after it, the figure to compare between machines (absolute MB/s
  // alone broke the project's rule: review, 2026-12-06; one reference measured before every
  // row put the load's drift over the run into the later rows: review, 2026-12-07). The
  // by-line rows' reference pre-tokenizes the same lines on the same number of threads.
  fmt::print("{:<50} {:>10} {:>10} {:>10}\n", "what", "MB/s", "tokens", "x pretok");

  volatile std::uint32_t sink = 0;
  fmt::print("{:<50} {:>10.1f} {:>10}\n", "reference: UTF-8 decode scan",
             mb_per_s(s, 5,
                      [&] {
                        std::uint32_t acc = 0;
                        for (std::size_t pos = 0; pos < s.size();) {
                          int len;
                          acc += sparq::data::decode_utf8(s, pos, &len);
                          pos += static_cast<std::size_t>(len);
                        }
                        sink = acc;
                      }),
             "-");
  std::vector<sparq::data::PieceSpan> pieces;
  const auto pretokenize = [&] {
    pieces.clear();
    sparq::data::gpt2_pretokenize(s, &pieces);
  };
  fmt::print("{:<50} {:>10.1f} {:>10} {:>10.3f}\n", "reference: GPT-2 pre-tokenization only",
             mb_per_s(s, 5, pretokenize), "-", 1.0);
  // threads == 0: the whole text at once, as the whole-text rows encode it.
  const auto row = [&](const std::string& what, double mbps, std::size_t tokens, int threads) {
    const double pretok =  // the reference, now
        threads == 0 ? mb_per_s(s, 3, pretokenize)
                     : mb_per_s(s, 3, [&] { pretokenize_threaded(lines, threads); });
    fmt::print("{:<50} {:>10.1f} {:>10} {:>10.3f}\n", what, mbps, tokens, mbps / pretok);
  };

  for (const auto& [kind, dir] :
       {std::pair<std::string, std::string>{"gpt2", gpt2_dir}, {"wordpiece", bert_dir}}) {
    auto tok = sparq::data::load_tokenizer(kind, dir);
    if (!tok.is_ok()) {
      fmt::print("{:<50} skipped: {}\n", kind, tok.status().message());
      continue;
    }
    std::vector<std::uint32_t> ids;
    // The first pass fills GPT-2's piece cache; later passes show the steady state.
    const double cold = mb_per_s(s, 1, [&] { ids.clear(), (*tok)->encode(s, &ids); });
    const double warm = mb_per_s(s, 3, [&] { ids.clear(), (*tok)->encode(s, &ids); });
    row(kind + " encode, 1 thread, first pass", cold, ids.size(), 0);
    row(kind + " encode, 1 thread, warm cache", warm, ids.size(), 0);
    // Per-thread caches: a first pass, then passes that reuse the warm caches.
    for (const int t : {1, threads}) {
      std::vector<std::unique_ptr<sparq::data::EncodeCache>> caches;
      for (int i = 0; i < t; ++i) caches.push_back((*tok)->new_cache());
      std::size_t n = 0;
      const double first = mb_per_s(s, 1, [&] { n = encode_threaded(**tok, lines, caches); });
      const double again = mb_per_s(s, 3, [&] { n = encode_threaded(**tok, lines, caches); });
      row(fmt::format("{} by line, {} thread(s), own caches, first", kind, t), first, n, t);
      row(fmt::format("{} by line, {} thread(s), own caches, warm", kind, t), again, n, t);
      if (t == threads) break;
    }
  }
  return 0;
}
