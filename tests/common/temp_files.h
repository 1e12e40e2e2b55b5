// temporaries_beside(path): the files in path's directory named path + ".tmp" + anything, that
// is write_file_atomic's temporary files of every version (Note [Atomic writes without a
// shared temporary name], core/file_io.h), so a test can check that none is left.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sparq::testing {

inline std::vector<std::string> temporaries_beside(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".tmp";
  std::vector<std::string> found;
  std::error_code ec;
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().starts_with(prefix)) found.push_back(e.path().string());
  }
  return found;
}

}  // namespace sparq::testing
