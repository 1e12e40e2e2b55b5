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
    // The highest folder this call makes: the parents create_directories makes go too (a
    // failed --out a/b/c left a and a/b: second review, 2026-12-06).
    fs::path top;
    const fs::path folder = without_trailing_separator(path);
    for (fs::path p = folder; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      top = p;
      if (p == p.parent_path()) break;
    }
    OutputDirectory dir(folder, top);
    fs::create_directories(path, ec);
    if (ec) return Status::error("cannot create output directory '{}': {}", path, ec.message());
    if (!fs::is_directory(path, ec)) {
      return Status::error("output directory '{}' is a file, not a folder", path);
    }
    return dir;
  }
  OutputDirectory(OutputDirectory&& other) noexcept
      : folder_(std::move(other.folder_)), top_(std::move(other.top_)) {
    other.top_.clear();
  }
  OutputDirectory& operator=(OutputDirectory&&) = delete;
  // From the folder up to the highest one this call made, each while it is empty: remove()
  // takes only an empty folder, so one that holds a written shard stays, and so its parents.
  ~OutputDirectory() {
    if (top_.empty()) return;
    std::error_code ignored;
    for (std::filesystem::path p = folder_;; p = p.parent_path()) {
      if (!std::filesystem::is_empty(p, ignored) || ignored ||
          !std::filesystem::remove(p, ignored)) {
        return;
      }
      if (p == top_ || p == p.parent_path()) return;
    }
  }

 private:
  OutputDirectory(std::filesystem::path folder, std::filesystem::path top)
      : folder_(std::move(folder)), top_(std::move(top)) {}
  // "a/b/" normalizes to "a/b/", whose parent is "a/b" again: the walk up removed a/b, then
  // stopped at the missing "a/b" and left "a" (review, 2026-12-06).
  static std::filesystem::path without_trailing_separator(const std::string& path) {
    std::filesystem::path p = std::filesystem::path(path).lexically_normal();
    if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
    return p;
  }
  std::filesystem::path folder_;
  std::filesystem::path top_;  // empty: the folder existed, nothing to remove
};

}  // namespace sparq::data
