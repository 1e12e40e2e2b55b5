#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace sparq {

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

namespace {

// Writes all of `bytes` to a new file `tmp` and fsyncs it; the caller removes it on failure.
Status write_and_sync(const std::string& tmp, std::string_view bytes) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error("cannot create '{}': {}", tmp, std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return Status::error("write to '{}' failed after {} of {} bytes: {}", tmp, done, bytes.size(),
                           std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  // Without fsync a crash after the rename could leave an empty or partial file in place.
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::error("fsync of '{}' failed: {}", tmp, std::strerror(err));
  }
  if (::close(fd) != 0) return Status::error("close of '{}' failed: {}", tmp, std::strerror(errno));
  return Status::ok();
}

}  // namespace

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  Status written = write_and_sync(tmp, bytes);
  if (!written) {
    std::remove(tmp.c_str());
    return written.with_context("writing '" + path + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return Status::error("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
  // Persist the rename itself; best effort, since the data is already safe in either name.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

}  // namespace sparq
