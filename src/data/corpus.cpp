#include "data/corpus.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/file_io.h"
#include "core/timer.h"
#include "data/shard.h"

namespace sparq::data {
namespace fs = std::filesystem;
namespace {

bool is_wikitext_title(std::string_view line) {
  // " = Title = " but not " = = Section = = ".
  return line.size() > 6 && line.starts_with(" = ") && line.ends_with(" = ") && line[3] != '=';
}

// Chunks of about this many bytes of text are encoded in parallel, then written in order.
constexpr std::size_t kChunkBytes = 4 << 20;

void encode_parallel(const Tokenizer& tok, const std::vector<std::string_view>& docs,
                     std::vector<std::vector<std::uint32_t>>* out, int threads) {
  out->assign(docs.size(), {});
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    const std::unique_ptr<EncodeCache> cache = tok.new_cache();  // private: no contention
    for (std::size_t i; (i = next.fetch_add(1)) < docs.size();) {
      tok.encode_cached(docs[i], &(*out)[i], cache.get());
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
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
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end;
    const std::string_view line = text.substr(pos, end - pos);
    if (format == InputFormat::kLines) {
      if (!line.empty()) docs.push_back(line);
    } else if (is_wikitext_title(line) && pos > doc_start) {
      // Blank lines before the first title join that article instead of forming a document.
      const std::string_view before = text.substr(doc_start, pos - doc_start);
      if (before.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        docs.push_back(before);
        doc_start = pos;
      }
    }
    pos = end + 1;
  }
  if (format == InputFormat::kWikiText && doc_start < text.size())
    docs.push_back(text.substr(doc_start));
  return docs;
}

Result<std::vector<std::string>> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(input, ec)) {
      files.push_back(input);
    } else if (fs::is_directory(input, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::recursive_directory_iterator(input, ec)) {
        if (entry.is_regular_file()) found.push_back(entry.path().string());
      }
      if (ec) return Status::error("cannot list directory '{}': {}", input, ec.message());
      std::sort(found.begin(), found.end());
      if (found.empty()) return Status::error("input directory '{}' has no files", input);
      files.insert(files.end(), found.begin(), found.end());
    } else {
      return Status::error("input '{}' does not exist", input);
    }
  }
  if (files.empty()) return Status::error("no input files given");
  return files;
}

Result<PrepareSummary> prepare_shards(const Tokenizer& tok, const PrepareOptions& options) {
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    return Status::error("--val-fraction must be in [0, 1), got {}", options.val_fraction);
  }
  SPARQ_ASSIGN_OR_RETURN(const std::vector<std::string> files, expand_inputs(options.inputs));
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec)
    return Status::error("cannot create output directory '{}': {}", options.out_dir, ec.message());
  const int threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());

  PrepareSummary summary;
  PrepareProgress progress;
  for (const auto& f : files) progress.bytes_total += fs::file_size(f, ec);
  summary.train_path = (fs::path(options.out_dir) / (options.name + ".bin")).string();
  SPARQ_ASSIGN_OR_RETURN(ShardWriter train,
                         ShardWriter::create(summary.train_path, tok.name(), tok.vocab_size()));
  std::optional<ShardWriter> val;
  if (options.val_fraction > 0) {
    summary.val_path = (fs::path(options.out_dir) / "val.bin").string();
    SPARQ_ASSIGN_OR_RETURN(ShardWriter w,
                           ShardWriter::create(summary.val_path, tok.name(), tok.vocab_size()));
    val.emplace(std::move(w));
  }
  const Stopwatch clock;
  const std::uint32_t sep = tok.document_separator();
  std::vector<std::vector<std::uint32_t>> encoded;
  std::vector<std::uint32_t> joined;
  for (const std::string& file : files) {
    SPARQ_ASSIGN_OR_RETURN(const std::string text, read_file(file));
    const std::vector<std::string_view> docs =
        split_documents(text, resolve_format(options.format, file));
    const std::uint64_t file_base = progress.bytes_done;
    for (std::size_t first = 0; first < docs.size();) {
      std::size_t last = first, bytes = 0;
      while (last < docs.size() && (bytes < kChunkBytes || last == first))
        bytes += docs[last++].size();
      const std::vector<std::string_view> chunk(docs.begin() + static_cast<std::ptrdiff_t>(first),
                                                docs.begin() + static_cast<std::ptrdiff_t>(last));
      encode_parallel(tok, chunk, &encoded, threads);
      for (const auto& ids : encoded) {
        const std::uint64_t g = summary.documents++;
        const double f = options.val_fraction;
        const bool to_val = val && std::floor((g + 1) * f) > std::floor(g * f);
        ShardWriter& w = to_val ? *val : train;
        joined.assign(1, sep);
        joined.insert(joined.end(), ids.begin(), ids.end());
        SPARQ_RETURN_IF_ERROR(w.append(joined));
        w.add_documents(1);
        (to_val ? summary.val_documents : summary.train_documents) += 1;
        (to_val ? summary.val_tokens : summary.train_tokens) += joined.size();
      }
      progress.bytes_done =
          file_base +
          static_cast<std::uint64_t>(docs[last - 1].data() + docs[last - 1].size() - text.data());
      progress.documents = summary.documents;
      progress.tokens = summary.train_tokens + summary.val_tokens;
      progress.seconds = clock.seconds();
      if (options.on_progress) options.on_progress(progress);
      first = last;
    }
    summary.bytes += text.size();
    progress.bytes_done = file_base + text.size();
  }
  if (summary.documents == 0) return Status::error("the inputs contain no documents");
  SPARQ_RETURN_IF_ERROR(train.finish());
  if (val) SPARQ_RETURN_IF_ERROR(val->finish());
  summary.seconds = clock.seconds();
  return summary;
}

}  // namespace sparq::data
