// Locating the real data sets of ../shared/data for tests and benchmarks. The folder exists
// on developer machines and CI but not in a user's fresh clone, so tests that need it must
// skip cleanly with a message.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace sparq::testing {

// $SPARQ_SHARED_DATA if set (a failure of the calling test when it is not a directory), else
// <source root>/../shared/data. Empty when absent.
inline std::string shared_data_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("SPARQ_SHARED_DATA")) {
    if (fs::is_directory(env)) return env;
    // Set but wrong (a typo) is a failure, not a skip: it would skip every data test.
    ADD_FAILURE() << "SPARQ_SHARED_DATA=" << env << " is not a directory";
    return {};
  }
  const fs::path candidate = fs::path(SPARQ_SOURCE_DIR) / ".." / "shared" / "data";
  return fs::is_directory(candidate) ? fs::canonical(candidate).string() : std::string();
}

// Full path of a file under shared/data ("gpt2-bpe/encoder.json"), or empty when absent.
inline std::string shared_data_file(const std::string& relative) {
  const std::string dir = shared_data_dir();
  if (dir.empty()) return {};
  const std::filesystem::path p = std::filesystem::path(dir) / relative;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

}  // namespace sparq::testing

// Skips the current test with a message when a shared data file is missing.
#define SPARQ_REQUIRE_SHARED_DATA(var, relative)                                             \
  const std::string var = ::sparq::testing::shared_data_file(relative);                      \
  if (var.empty())                                                                          \
  GTEST_SKIP() << "../shared/data/" << (relative)                                           \
               << " not found (set SPARQ_SHARED_DATA or place shared/ beside the repo): skipped"
