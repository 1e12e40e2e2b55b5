// prepare_data's inputs: files and directories expanded to the list of text files to read
// (data/corpus.h, expand_inputs).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/shard.h"

namespace sparq::data {
namespace fs = std::filesystem;

namespace {

// Earlier output of this tool: tokenizing its binary ids as text is never wanted.
bool is_shard_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof(kShardMagic)] = {};
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, kShardMagic, sizeof(magic)) == 0;
}

// Whether a directory walk leaves out `entry` (and, for a directory, all under it).
bool skipped(const fs::directory_entry& entry, const std::string& skip_dir) {
  if (entry.path().filename().string().starts_with('.')) return true;
  std::error_code ec;
  return !skip_dir.empty() && entry.is_directory(ec) && fs::equivalent(entry.path(), skip_dir, ec);
}

// Appends the files of the directory `dir` (the header's rules) in walk order.
Status list_directory(const std::string& dir, const std::string& skip_dir,
                      std::vector<std::string>* found, std::vector<std::string>* warnings) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec);
  if (ec) return Status::error("cannot list input directory '{}': {}", dir, ec.message());
  // The error_code forms throughout: an unreadable subdirectory must be an error that names
  // it, not an exception out of operator++.
  for (const fs::recursive_directory_iterator end; it != end;) {
    const fs::directory_entry entry = *it;
    bool descend = false;
    if (skipped(entry, skip_dir)) {
      it.disable_recursion_pending();
    } else if (entry.is_regular_file(ec)) {
      if (!is_shard_file(entry.path().string())) found->push_back(entry.path().string());
    } else if (entry.is_directory(ec) && entry.is_symlink(ec)) {
      // Not followed (a link to a folder above it would loop); it was skipped without a word
      // (review, 2026-12-07).
      if (warnings) {
        warnings->push_back(fmt::format(
            "'{}' is a link to a folder, not followed: name its target as an --input to read "
            "it",
            entry.path().string()));
      }
    } else if (entry.is_directory(ec)) {
      descend = true;
    } else if (warnings) {
      // A broken link, a pipe, a socket or a device: skipped, and said, as the folder links
      // above (it was skipped without a word: review, 2026-12-07).
      warnings->push_back(fmt::format(
          "'{}' is {}: skipped", entry.path().string(),
          entry.is_symlink(ec) ? "a link to nothing that exists" : "neither a file nor a folder"));
    }
    it.increment(ec);
    if (ec) {
      // Failing to open the directory just entered, or to read on in the current one.
      const fs::path bad = descend ? entry.path() : entry.path().parent_path();
      return Status::error("cannot read directory '{}' (under input '{}'): {}", bad.string(), dir,
                           ec.message());
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> expand_inputs(const std::vector<std::string>& inputs,
                                               const std::string& skip_dir,
                                               std::vector<std::string>* warnings) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(input, ec)) {
      if (is_shard_file(input)) {
        return Status::error("input '{}' is a sparq token shard, not text", input);
      }
      files.push_back(input);
    } else if (fs::is_directory(input, ec)) {
      // The output directory's own files are what this run writes (a half-written shard
      // left by an interrupted run has no magic yet and would be read as text; review).
      if (!skip_dir.empty() && fs::equivalent(input, skip_dir, ec)) {
        return Status::error(
            "input directory '{}' is the output directory; keep the text "
            "and the shards apart",
            input);
      }
      std::vector<std::string> found;
      SPARQ_RETURN_IF_ERROR(list_directory(input, skip_dir, &found, warnings));
      std::sort(found.begin(), found.end());
      if (found.empty()) {
        return Status::error(
            "input directory '{}' has no files (hidden entries, sparq shards and the output "
            "directory are skipped)",
            input);
      }
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(input, ec)) {
      return Status::error("input '{}' is neither a regular file nor a directory", input);
    } else {
      return Status::error("input '{}' does not exist", input);
    }
  }
  if (files.empty()) return Status::error("no input files given");
  // A file read twice (a folder and a file in it, a folder named twice, or two hard links
  // to one file) has its documents twice, under other numbers, so the split can put one copy
  // in train.bin and the other in val.bin: validation text trained on, without a word
  // (review, 2026-12-06; hard links got past a path comparison: second review, 2026-12-06).
  std::map<std::string, const std::string*> seen;  // the file's identity -> the file as listed
  for (const std::string& file : files) {
    struct stat st {};
    std::string identity;
    if (::stat(file.c_str(), &st) == 0) {
      identity = fmt::format("{}:{}", st.st_dev, st.st_ino);
    } else {
      std::error_code ec;
      const fs::path canonical = fs::weakly_canonical(file, ec);
      identity = ec ? file : canonical.string();
    }
    const auto [it, fresh] = seen.emplace(identity, &file);
    if (!fresh) {
      return Status::error(
          "input file '{}' is read twice (also as '{}'): the inputs name it twice, directly, "
          "through a directory or by a hard link, and its documents could land in both "
          "train.bin and val.bin; name each file once",
          file, *it->second);
    }
  }
  return files;
}

}  // namespace sparq::data
