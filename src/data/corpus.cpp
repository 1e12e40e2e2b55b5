#include "data/corpus.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <span>
#include <thread>

#include "core/file_io.h"
#include "core/timer.h"
#include "data/output_dir.h"
#include "data/shard.h"

namespace sparq::data {
namespace fs = std::filesystem;
namespace {

// A line without the '\r' of a "\r\n" line end.
std::string_view without_cr(std::string_view line) {
  return line.ends_with('\r') ? line.substr(0, line.size() - 1) : line;
}

bool is_wikitext_title(std::string_view line) {
  // " = Title = " but not " = = Section = = ".
  return line.size() > 6 && line.starts_with(" = ") && line.ends_with(" = ") && line[3] != '=';
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

// Chunks of about this many bytes of text are encoded in parallel, then written in order.
constexpr std::size_t kChunkBytes = 4 << 20;

// Encodes docs[i] into (*out)[i] on `threads` threads. An exception on a worker thread
// (std::bad_alloc for one huge document: a 2 GB single-document file needs about 30 GB)
// called std::terminate, ending prepare_data without naming the input (review,
// 2026-12-06): the first one is kept, the others stop, and it returns as an error naming the
// document (`first_index`: the chunk's first document within its file).
Status encode_parallel(const Tokenizer& tok, const std::vector<std::string_view>& docs,
                       std::vector<std::vector<std::uint32_t>>* out, int threads,
                       std::size_t first_index) {
  out->assign(docs.size(), {});
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::optional<Status> failure;
  const auto work = [&] {
    std::size_t i = docs.size();  // no document yet: new_cache() can throw too
    try {
      const std::unique_ptr<EncodeCache> cache = tok.new_cache();  // private: no contention
      while ((i = next.fetch_add(1)) < docs.size()) {
        tok.encode_cached(docs[i], &(*out)[i], cache.get());
      }
    } catch (const std::exception& e) {
      next = docs.size();  // the other threads stop at their next document
      const std::lock_guard lock(failure_mutex);
      if (!failure) {
        const std::string what = i < docs.size() ? fmt::format("encoding document {} ({} bytes)",
                                                               first_index + i + 1, docs[i].size())
                                                 : std::string("preparing the encoder");
        failure = Status::error(
            "{} failed: {}{}", what, e.what(),
            dynamic_cast<const std::bad_alloc*>(&e) != nullptr
                ? " (out of memory: split the input into smaller documents, e.g. --format "
                  "lines, or give it more memory)"
                : "");
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  return failure ? *failure : Status::ok();
}

}  // namespace

Result<InputFormat> parse_input_format(const std::string& name) {
  if (name == "auto") return InputFormat::kAuto;
  if (name == "wikitext") return InputFormat::kWikiText;
  if (name == "lines") return InputFormat::kLines;
  if (name == "text") return InputFormat::kText;
  return Status::error("unknown input format '{}' (expected auto, wikitext, lines or text)", name);
}

InputFormat resolve_format(InputFormat format, const std::string& path) {
  if (format != InputFormat::kAuto) return format;
  const std::string file = fs::path(path).filename().string();
  const bool wiki =
      file.starts_with("wiki.") && (file.ends_with(".raw") || file.ends_with(".tokens"));
  return wiki ? InputFormat::kWikiText : InputFormat::kText;
}

std::vector<std::string_view> split_documents(std::string_view text, InputFormat format) {
  std::vector<std::string_view> docs;
  if (format == InputFormat::kText || format == InputFormat::kAuto) {
    if (!text.empty()) docs.push_back(text);
    return docs;
  }
  std::size_t doc_start = 0;
  // A title follows a blank line (or starts the file): wrapped formulas inside a paragraph
  // also read " = ... = " (" = 1 rad / s and a nominal impedance k = "), and split
  // wiki.test.raw into 62 documents instead of its 60 articles (review, 2026-12-07).
  bool after_blank = true;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end;
    const std::string_view line = without_cr(text.substr(pos, end - pos));
    const bool title = after_blank && is_wikitext_title(line);
    after_blank = is_blank(line);
    if (format == InputFormat::kLines) {
      if (!line.empty()) docs.push_back(line);
    } else if (title && pos > doc_start) {
      // Blank lines before the first title join that article instead of forming a document.
      const std::string_view before = text.substr(doc_start, pos - doc_start);
      if (before.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        docs.push_back(before);
        doc_start = pos;
      }
    }
    pos = end + 1;
  }
  // A file of blank lines holds no article (it made one document of whitespace: review,
  // 2026-12-07); after a title, what remains is that article.
  if (format == InputFormat::kWikiText &&
      text.find_first_not_of(" \t\r\n", doc_start) != std::string_view::npos) {
    docs.push_back(text.substr(doc_start));
  }
  return docs;
}

double progress_fraction(const PrepareProgress& p) {
  if (p.bytes_total == 0) return 1.0;
  return std::clamp(static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total), 0.0,
                    1.0);
}

namespace {

// "'a', 'b', 'c' and 2 more": the inputs, for messages about all of them.
std::string describe_inputs(const std::vector<std::string>& inputs) {
  constexpr std::size_t kShown = 3;
  std::string out;
  for (std::size_t i = 0; i < std::min(inputs.size(), kShown); ++i)
    out += fmt::format("{}'{}'", i > 0 ? ", " : "", inputs[i]);
  if (inputs.size() > kShown) out += fmt::format(" and {} more", inputs.size() - kShown);
  return out;
}

// Checked before encoding: past the limit the GPT-2 pre-tokenizer's 32-bit offsets wrap.
Status check_document_sizes(const std::string& file, const std::vector<std::string_view>& docs,
                            std::uint64_t limit) {
  for (std::size_t i = 0; i < docs.size(); ++i) {
    if (docs[i].size() <= limit) continue;
    return Status::error(
        "'{}': document {} of the file is {} bytes, more than the {}-byte limit for one "
        "document; split it (--format lines or wikitext, or several files)",
        file, i + 1, docs[i].size(), limit);
  }
  return Status::ok();
}

// An empty val.bin would only make training fail later, far from the cause.
Status check_val_split(const PrepareSummary& s, const PrepareOptions& o) {
  if (o.val_fraction == 0 || s.val_documents > 0) return Status::ok();
  const std::string inputs = describe_inputs(o.inputs);
  if (s.documents < 2) {
    return Status::error(
        "--val-fraction {}: the inputs {} hold {} document, too few for a validation split; "
        "add input, or use --val-fraction 0",
        o.val_fraction, inputs, s.documents);
  }
  // The smallest fraction with 3 decimals that gives floor(N F) >= 1.
  const double least = std::ceil(1000.0 / static_cast<double>(s.documents)) / 1000;
  return Status::error(
      "--val-fraction {} puts floor({} x {}) = 0 of the {} documents of {} into {}.bin, which "
      "would be empty; use --val-fraction {} or more, add input, or use --val-fraction 0",
      o.val_fraction, s.documents, o.val_fraction, s.documents, inputs, validation_stem(o.name),
      least);
}

// One run of prepare_shards: the writers, the counts and the progress.
class Preparer {
 public:
  Preparer(const Tokenizer& tok, const PrepareOptions& options, ShardWriter train,
           std::optional<ShardWriter> val)
      : tok_(tok), options_(options), train_(std::move(train)), val_(std::move(val)) {
    threads_ = options.threads > 0
                   ? options.threads
                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  void warn(std::string warning) { summary_.warnings.push_back(std::move(warning)); }

  // `measured` is the size the file had when the total was computed.
  Status add_file(const std::string& file, std::uint64_t measured) {
    SPARQ_ASSIGN_OR_RETURN(const std::string text, read_file(file));
    // Text has no NUL bytes; binary files and UTF-16 text do, and were tokenized without a
    // word (review, 2026-12-07). Said, not refused: the bytes are what the user named.
    if (text.find('\0') != std::string::npos) {
      warn(
          fmt::format("input '{}' holds NUL bytes (a binary file, or UTF-16 text?): tokenized "
                      "byte for byte as it is",
                      file));
    }
    // A file that changed since it was measured: keep the total true, so that the progress
    // never passes 100%.
    progress_.bytes_total = progress_.bytes_total - measured + text.size();
    const std::vector<std::string_view> docs =
        split_documents(text, resolve_format(options_.format, file));
    SPARQ_RETURN_IF_ERROR(check_document_sizes(file, docs, options_.max_document_bytes));
    const std::uint64_t file_base = progress_.bytes_done;
    for (std::size_t first = 0; first < docs.size();) {
      std::size_t last = first, bytes = 0;
      while (last < docs.size() && (bytes < kChunkBytes || last == first))
        bytes += docs[last++].size();
      SPARQ_RETURN_IF_ERROR(add_chunk(std::span(docs).subspan(first, last - first), first)
                                .with_context(fmt::format("input '{}'", file)));
      const std::string_view end = docs[last - 1];
      report(file_base + static_cast<std::uint64_t>(end.data() + end.size() - text.data()));
      first = last;
    }
    summary_.bytes += text.size();
    progress_.bytes_done = file_base + text.size();
    return Status::ok();
  }

  Result<PrepareSummary> finish() {
    if (summary_.documents == 0) {
      return Status::error("the inputs {} contain no documents{}", describe_inputs(options_.inputs),
                           summary_.empty_documents == 0
                               ? ""
                               : fmt::format(" with tokens (the {} they hold encode to nothing)",
                                             summary_.empty_documents));
    }
    SPARQ_RETURN_IF_ERROR(check_val_split(summary_, options_));
    std::vector<ShardWriter*> writers = {&train_};
    if (val_) writers.push_back(&*val_);
    SPARQ_RETURN_IF_ERROR(finish_together(writers));
    for (const ShardWriter* w : writers) {
      for (const std::string& file : private_temporaries(w->path())) {
        warn(describe_other_writers_temporary(file));
      }
    }
    summary_.train_path = train_.path();
    if (val_) summary_.val_path = val_->path();
    summary_.seconds = clock_.seconds();
    return summary_;
  }

  void set_bytes_total(std::uint64_t total) { progress_.bytes_total = total; }

 private:
  // `first_index`: the chunk's first document within its file (for errors).
  Status add_chunk(std::span<const std::string_view> chunk, std::size_t first_index) {
    SPARQ_RETURN_IF_ERROR(encode_parallel(tok_,
                                          std::vector<std::string_view>(chunk.begin(), chunk.end()),
                                          &encoded_, threads_, first_index));
    const double f = options_.val_fraction;
    for (const auto& ids : encoded_) {
      // A document that encodes to nothing (WordPiece drops control characters and
      // whitespace) carries no text: written, it was a lone separator, and the empty-split
      // check counted it, so val.bin could hold nothing but separators (review, 2026-12-06).
      if (ids.empty()) {
        ++summary_.empty_documents;
        continue;
      }
      const std::uint64_t g = summary_.documents++;
      const bool to_val = val_ && std::floor((g + 1) * f) > std::floor(g * f);
      ShardWriter& w = to_val ? *val_ : train_;
      joined_.assign(1, tok_.document_separator());
      joined_.insert(joined_.end(), ids.begin(), ids.end());
      SPARQ_RETURN_IF_ERROR(w.append(joined_));
      SPARQ_RETURN_IF_ERROR(w.add_documents(1));
      (to_val ? summary_.val_documents : summary_.train_documents) += 1;
      (to_val ? summary_.val_tokens : summary_.train_tokens) += joined_.size();
    }
    return Status::ok();
  }

  void report(std::uint64_t bytes_done) {
    progress_.bytes_done = bytes_done;
    progress_.documents = summary_.documents;
    progress_.tokens = summary_.train_tokens + summary_.val_tokens;
    progress_.seconds = clock_.seconds();
    if (options_.on_progress) options_.on_progress(progress_);
  }

  const Tokenizer& tok_;
  const PrepareOptions& options_;
  ShardWriter train_;
  std::optional<ShardWriter> val_;
  int threads_ = 1;
  const Stopwatch clock_;
  PrepareSummary summary_;
  PrepareProgress progress_;
  std::vector<std::vector<std::uint32_t>> encoded_;
  std::vector<std::uint32_t> joined_;
};

}  // namespace

Status check_split_options(const PrepareOptions& options) {
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    return Status::error("--val-fraction must be in [0, 1), got {}", options.val_fraction);
  }
  // The stem of a file in --out: "" wrote a hidden ".bin" and "a/b" a file in a subfolder
  // that was never made (review, 2026-12-06).
  if (options.name.empty() || options.name.find('/') != std::string::npos || options.name == "." ||
      options.name == "..") {
    return Status::error("--name '{}': the shard's file stem, not empty and without '/'",
                         options.name);
  }
  // val.bin is --name train's split (validation_stem): a main shard of that name next to a
  // split of its own would replace it, pairing train.bin with other text (the app refused
  // it, the library did not: review, 2026-12-06).
  // So is a name like another's split, X.val (review, 2026-12-07). Without a split of its
  // own, such a name is a validation shard made on its own (--name val for wiki.valid.raw).
  const bool split_name = options.name == "val" || options.name.ends_with(".val");
  if (options.val_fraction > 0 && split_name) {
    const std::string owner =
        options.name == "val" ? "train" : options.name.substr(0, options.name.size() - 4);
    return Status::error(
        "--name {}: {}.bin is the validation split of --name {}; choose another --name, "
        "or --val-fraction 0",
        options.name, options.name, owner);
  }
  return Status::ok();
}

std::string validation_stem(const std::string& name) {
  return name == "train" ? std::string("val") : name + ".val";
}

Result<PrepareSummary> prepare_shards(const Tokenizer& tok, const PrepareOptions& options) {
  SPARQ_RETURN_IF_ERROR(check_split_options(options));
  std::vector<std::string> warnings;
  SPARQ_ASSIGN_OR_RETURN(const std::vector<std::string> files,
                         expand_inputs(options.inputs, options.out_dir, &warnings));
  // Declared before the writers, so it is removed (when this run made it and it is empty)
  // after they removed their temporaries.
  SPARQ_ASSIGN_OR_RETURN(const OutputDirectory out_dir, OutputDirectory::create(options.out_dir));
  std::error_code ec;
  const auto path = [&](const std::string& stem) {
    return (fs::path(options.out_dir) / (stem + ".bin")).string();
  };
  SPARQ_ASSIGN_OR_RETURN(ShardWriter train,
                         ShardWriter::create(path(options.name), tok.name(), tok.vocab_size()));
  std::optional<ShardWriter> val;
  if (options.val_fraction > 0) {
    SPARQ_ASSIGN_OR_RETURN(ShardWriter w, ShardWriter::create(path(validation_stem(options.name)),
                                                              tok.name(), tok.vocab_size()));
    val.emplace(std::move(w));
  }
  std::vector<std::uint64_t> sizes;
  for (const auto& f : files) {
    const std::uintmax_t size = fs::file_size(f, ec);
    sizes.push_back(ec ? 0 : size);  // unreadable: read_file reports it below
  }
  Preparer run(tok, options, std::move(train), std::move(val));
  for (std::string& w : warnings) run.warn(std::move(w));
  run.set_bytes_total(std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0}));
  for (std::size_t i = 0; i < files.size(); ++i) {
    SPARQ_RETURN_IF_ERROR(run.add_file(files[i], sizes[i]));
  }
  return run.finish();
}

}  // namespace sparq::data
