#include "sim/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/file_io.h"

namespace sparq::sim {
namespace {

// Every byte to an existing special file, each write and the close checked.
Status write_through(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::error("cannot open '{}': {}", path, std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n == 0 ? ENOSPC : errno;
      ::close(fd);
      return Status::error("write to '{}' failed after {} of {} bytes: {}", path, done, text.size(),
                           std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    return Status::error("close of '{}' failed ({} bytes written): {}", path, text.size(),
                         std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace

bool is_special_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);  // follows symbolic links
  return !ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status);
}

Status write_output_file(const std::string& path, std::string_view text) {
  if (is_special_file(path)) return write_through(path, text);
  std::error_code ec;
  std::string target = path;
  // Replace the file the link names, not the link (which would become a regular file). Link
  // by link, so that a link to a file not written yet works too (canonical() refuses one).
  std::filesystem::path resolved = path;
  for (int hops = 0; std::filesystem::is_symlink(resolved, ec); ++hops) {
    if (hops == 40) return Status::error("cannot resolve the link '{}': too many levels", path);
    const std::filesystem::path next = std::filesystem::read_symlink(resolved, ec);
    if (ec) return Status::error("cannot resolve the link '{}': {}", path, ec.message());
    resolved = next.is_absolute() ? next : resolved.parent_path() / next;
  }
  target = resolved.string();
  return write_file_atomic(target, text);
}

}  // namespace sparq::sim
