// Turning text corpora into token shards (the library side of apps/prepare_data).
//
// Input formats, chosen per file (kAuto picks kWikiText for wiki.*.raw / wiki.*.tokens and
// kText otherwise):
//   kWikiText  WikiText files: an article starts at a line " = Title = " (one '=' level);
//              "= = Section = =" headings and all other lines stay in the article as text.
//   kLines     one document per line (empty lines skipped; a line of spaces is a document;
//              the line end is not included).
//   kText      the whole file is one document.
// Lines end at "\n" or "\r\n": one '\r' before the '\n' is not part of a kLines document
// nor of a heading (files checked out with CRLF endings split like LF ones). Documents
// otherwise keep their bytes as they are (a kWikiText article keeps its "\r\n"s).
// Each document is encoded on its own and preceded by the tokenizer's document separator
// (<|endoftext|> or [SEP]), so a shard starts with the separator, as llm.c's do.
//
// Directories are walked recursively; they contribute their regular files in sorted order,
// except hidden entries (names starting with '.', such as .git, with everything under them),
// the output directory, and files that are sparq token shards (they start with the shard
// magic: earlier output). A file named as an input is always read, unless it is a shard.
//
// Limits: a single document may be at most max_document_bytes (4 GiB - 1: the GPT-2
// pre-tokenizer's offsets are 32-bit), and a shard at most 2^32 - 1 documents (the header's
// count); past them prepare_shards fails with an error naming the input.
//
// Determinism: documents are numbered in input order (files in the order given, directories
// expanded as above), leaving out those that encode to no tokens; with val_fraction F, document g
// goes to the validation shard iff floor((g + 1) F) > floor(g F), which spreads exactly floor(N F)
// documents evenly over the corpus. The thread count changes nothing in the output.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace sparq::data {

enum class InputFormat { kAuto, kWikiText, kLines, kText };

Result<InputFormat> parse_input_format(const std::string& name);  // auto|wikitext|lines|text
// The format kAuto resolves to for this file name.
InputFormat resolve_format(InputFormat format, const std::string& path);
// Documents of `text` as views into it.
std::vector<std::string_view> split_documents(std::string_view text, InputFormat format);
// Files and directories (recursively, sorted, skipping what the header says and everything
// under `skip_dir` when it is not empty) to a list of regular files. Links to folders inside
// a walked folder are not followed (a loop would never end); each is named in `warnings`.
Result<std::vector<std::string>> expand_inputs(const std::vector<std::string>& inputs,
                                               const std::string& skip_dir = "",
                                               std::vector<std::string>* warnings = nullptr);

struct PrepareProgress {
  std::uint64_t bytes_done = 0, bytes_total = 0;
  std::uint64_t documents = 0, tokens = 0;
  double seconds = 0;
};
// bytes_done / bytes_total in [0, 1] (a file that grows while it is read can push the
// count past the total measured at the start).
double progress_fraction(const PrepareProgress& progress);

inline constexpr std::uint64_t kMaxDocumentBytes = 0xFFFFFFFFu;

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string name = "train";  // shard file stem; the validation shard's: validation_stem()
  double val_fraction = 0;
  InputFormat format = InputFormat::kAuto;
  int threads = 0;                                          // 0: hardware concurrency
  std::function<void(const PrepareProgress&)> on_progress;  // called after every chunk
  std::uint64_t max_document_bytes = kMaxDocumentBytes;     // tests lower it
};

struct PrepareSummary {
  std::uint64_t documents = 0, bytes = 0;
  std::uint64_t empty_documents = 0;  // encoded to no tokens: left out, not in `documents`
  std::uint64_t train_documents = 0, train_tokens = 0;
  std::uint64_t val_documents = 0, val_tokens = 0;
  double seconds = 0;
  std::string train_path, val_path;  // val_path empty when val_fraction == 0
  // What the run read otherwise than a user may think: folder links not followed, files
  // with NUL bytes (binary, or UTF-16 text) tokenized as they are.
  std::vector<std::string> warnings;
};

// The validation split's file stem beside a main shard named `name`: "val" beside the default
// "train" (the layout the configs name), "<name>.val" beside any other. One val.bin for every
// name let a run of another --name in the same folder replace the split of train.bin, which
// then sat next to another corpus's validation text (review, 2026-12-07).
std::string validation_stem(const std::string& name);

// Writes <name>.bin (and its validation split when val_fraction > 0) together: on any error neither
// file is replaced (ShardWriter's finish_together), and a validation split that would be empty is
// an error rather than an empty val.bin.
Result<PrepareSummary> prepare_shards(const Tokenizer& tokenizer, const PrepareOptions& options);

// The checks of `options` that every way of writing shards shares (prepare_shards, and
// prepare_data's Markov path): val_fraction in [0, 1), and with a validation split, no main
// shard named like one (val, X.val: validation_stem), which would replace another run's.
Status check_split_options(const PrepareOptions& options);

}  // namespace sparq::data
