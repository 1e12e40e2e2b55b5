// Shared by the fuzz targets: the readers under test take a path, so each input goes
// through one scratch file per process (in $TMPDIR, /tmp by default; tmpfs keeps it fast).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace sparq::fuzz {

// A scratch path of this process for `suffix` (several fuzzer jobs may run side by side).
inline std::string scratch_path(std::string_view suffix) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/sparq-fuzz-" + std::to_string(::getpid()) +
         std::string(suffix);
}

// Writes bytes to `path` (replacing it); aborts when the disk refuses, which is no finding.
inline void write_scratch(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

// A broken property: print it and abort, so that libFuzzer saves the input as a crash.
[[noreturn]] inline void property_failed(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace sparq::fuzz
