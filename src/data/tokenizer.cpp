#include "data/tokenizer.h"

#include <filesystem>

#include "data/gpt2_tokenizer.h"
#include "data/wordpiece_tokenizer.h"

namespace sparq::data {

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& kind, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (fs::exists(dir, ec)) {
      return Status::error(
          "tokenizer directory '{}' is a file, not a folder: name the folder that holds the "
          "vocabulary files",
          dir);
    }
    return Status::error("tokenizer directory '{}' does not exist (see scripts/get_data.sh)", dir);
  }
  if (kind == "gpt2") {
    SPARQ_ASSIGN_OR_RETURN(auto tok, Gpt2Tokenizer::load((fs::path(dir) / "encoder.json").string(),
                                                         (fs::path(dir) / "vocab.bpe").string()));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (kind == "wordpiece") {
    for (const char* file : {"vocab.txt", "bert-base-uncased-vocab.txt"}) {
      const fs::path path = fs::path(dir) / file;
      std::error_code ec;  // the throwing form ended the job on EACCES or ELOOP
      if (!fs::exists(path, ec)) {
        if (ec) return Status::error("cannot look up '{}': {}", path.string(), ec.message());
        continue;
      }
      SPARQ_ASSIGN_OR_RETURN(auto tok, WordPieceTokenizer::load(path.string()));
      return std::unique_ptr<Tokenizer>(std::move(tok));
    }
    return Status::error("no vocab.txt or bert-base-uncased-vocab.txt in '{}'", dir);
  }
  return Status::error("unknown tokenizer '{}' (expected gpt2 or wordpiece)", kind);
}

}  // namespace sparq::data
