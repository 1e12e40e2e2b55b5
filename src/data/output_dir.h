// The output folder of a data preparation (prepare_shards, prepare_data --markov-tokens):
// made when it is missing, and removed again when the run fails before writing into it, so
// a refusal (an empty val.bin, no documents, a bad --name) leaves no empty --out folder
// behind (new-user review, 2026-12-06; the Markov path kept one: review, 2026-12-06).
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "core/status.h"

namespace sparq::data {

class OutputDirectory {
 public:
  // Makes `path` (and its parents) when missing; an error names it and says why.
  static Result<OutputDirectory> create(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    OutputDirectory dir(path, !fs::exists(path, ec));
    fs::create_directories(path, ec);
    if (ec) return Status::error("cannot create output directory '{}': {}", path, ec.message());
    if (!fs::is_directory(path, ec)) {
      return Status::error("output directory '{}' is a file, not a folder", path);
    }
    return dir;
  }
  OutputDirectory(OutputDirectory&& other) noexcept
      : path_(std::move(other.path_)), made_(other.made_) {
    other.made_ = false;
  }
  OutputDirectory& operator=(OutputDirectory&&) = delete;
  // remove() takes only an empty folder: one that holds a written shard stays.
  ~OutputDirectory() {
    std::error_code ignored;
    if (made_ && std::filesystem::is_empty(path_, ignored)) std::filesystem::remove(path_, ignored);
  }

 private:
  OutputDirectory(std::string path, bool made) : path_(std::move(path)), made_(made) {}
  std::string path_;
  bool made_ = false;
};

}  // namespace sparq::data
