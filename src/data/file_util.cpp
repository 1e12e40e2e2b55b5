#include "data/file_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace sparq::data {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::error("cannot open '{}': {}", path, std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) return Status::error("cannot determine the size of '{}'", path);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size)) {
    return Status::error("short read from '{}' (expected {} bytes)", path, size);
  }
  return bytes;
}

Status write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::error("cannot create '{}': {}", tmp, std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return Status::error("write to '{}' failed: {}", tmp, std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::error("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  return Status::ok();
}

}  // namespace sparq::data
