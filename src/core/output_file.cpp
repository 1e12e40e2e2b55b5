#include "core/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/file_io.h"

namespace sparq {
namespace {

// Every byte of `text` to `fd`, each write checked; `path` names it in errors.
Status write_all(int fd, const std::string& path, std::string_view text) {
  int err = 0;
  const std::size_t done = write_fully(fd, text, &err);
  if (done < text.size()) {
    return Status::error("write to '{}' failed after {} of {} bytes: {}", path, done, text.size(),
                         std::strerror(err));
  }
  return Status::ok();
}

// Opens `path` (O_WRONLY | `flags`) and writes every byte, the close checked too.
Status write_through(const std::string& path, std::string_view text, int flags) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags);
  if (fd < 0) return Status::error("cannot open '{}': {}", path, std::strerror(errno));
  const Status written = write_all(fd, path, text);
  if (::close(fd) != 0 && written.is_ok()) {
    return Status::error("close of '{}' failed ({} bytes written): {}", path, text.size(),
                         std::strerror(errno));
  }
  return written;
}

// To a descriptor of this process, where it stands (the end, under >>). What stdio holds (the
// tables, log lines) goes first, so the file keeps the order they were printed in.
Status write_to_descriptor(int fd, const std::string& path, std::string_view text) {
  std::fflush(nullptr);
  return write_all(fd, path, text);
}

std::optional<int> whole_number(std::string_view text) {
  int value = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < 0)
    return std::nullopt;
  return value;
}

struct Descriptor {
  bool own = true;  // of this process (else of the process /proc/<pid> names)
  int fd = -1;
};

// The descriptor `path` names by its spelling: /dev/stdout, /dev/stderr, /dev/fd/N,
// /proc/{self,thread-self,PID}[/task/TID]/fd/N. Lexical, so a descriptor that is not open is
// the write's error, not a new file beside /proc/self/fd.
std::optional<Descriptor> named_descriptor(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) return std::nullopt;
  const std::string normal = absolute.lexically_normal().string();
  if (normal == "/dev/stdout") return Descriptor{true, 1};
  if (normal == "/dev/stderr") return Descriptor{true, 2};
  std::string_view rest = normal;
  if (rest.starts_with("/dev/fd/")) {
    const auto fd = whole_number(rest.substr(8));
    return fd ? std::optional(Descriptor{true, *fd}) : std::nullopt;
  }
  if (!rest.starts_with("/proc/")) return std::nullopt;
  rest.remove_prefix(6);
  const std::string_view who = rest.substr(0, rest.find('/'));
  rest.remove_prefix(who.size());
  if (rest.starts_with("/task/")) {  // a thread's table: its process's
    rest.remove_prefix(6);
    rest.remove_prefix(std::min(rest.size(), rest.find('/')));
  }
  if (!rest.starts_with("/fd/")) return std::nullopt;
  const auto fd = whole_number(rest.substr(4));
  if (!fd) return std::nullopt;
  if (who == "self" || who == "thread-self") return Descriptor{true, *fd};
  const auto pid = whole_number(who);
  if (!pid) return std::nullopt;
  return Descriptor{*pid == static_cast<int>(::getpid()), *fd};
}

// `path` with its symbolic links followed link by link (canonical() refuses a link to a file
// not written yet), stopping at the first name of a descriptor.
struct Resolved {
  std::string path;
  std::optional<Descriptor> descriptor;
};
Result<Resolved> resolve(const std::string& path) {
  std::error_code ec;
  std::filesystem::path resolved = path;
  for (int hops = 0;; ++hops) {
    if (auto d = named_descriptor(resolved)) return Resolved{resolved.string(), d};
    if (!std::filesystem::is_symlink(resolved, ec)) return Resolved{resolved.string(), {}};
    if (hops == 40) return Status::error("cannot resolve the link '{}': too many levels", path);
    const std::filesystem::path next = std::filesystem::read_symlink(resolved, ec);
    if (ec) return Status::error("cannot resolve the link '{}': {}", path, ec.message());
    resolved = next.is_absolute() ? next : resolved.parent_path() / next;
  }
}

// 1 or 2 when `path` (links followed) is the file standard output or error writes to, else -1.
int standard_stream_of(const std::string& path) {
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0) return -1;
  for (const int fd : {1, 2}) {
    struct stat stream {};
    if (::fstat(fd, &stream) == 0 && stream.st_dev == target.st_dev &&
        stream.st_ino == target.st_ino)
      return fd;
  }
  return -1;
}

// Exists and, following links, is not a regular file: a device, pipe or socket.
bool is_device_or_pipe(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  return !ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status);
}

}  // namespace

int duplicate_stream_descriptor(const std::string& path) {
  auto resolved = resolve(path);
  int fd = -1;
  if (resolved.is_ok() && resolved->descriptor && resolved->descriptor->own) {
    fd = resolved->descriptor->fd;
  } else {
    fd = standard_stream_of(path);
  }
  return fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

std::string resolve_links(const std::string& path) {
  auto resolved = resolve(path);
  return resolved.is_ok() ? resolved->path : path;
}

bool is_special_file(const std::string& path) {
  auto resolved = resolve(path);
  if (resolved.is_ok() && resolved->descriptor) return true;
  return standard_stream_of(path) >= 0 || is_device_or_pipe(path);
}

Status write_output_file(const std::string& path, std::string_view text) {
  SPARQ_ASSIGN_OR_RETURN(Resolved resolved, resolve(path));
  if (resolved.descriptor) {
    if (resolved.descriptor->own) return write_to_descriptor(resolved.descriptor->fd, path, text);
    // Another process's: its own offset is out of reach, so appended to, never truncated.
    return write_through(resolved.path, text, O_APPEND);
  }
  if (const int fd = standard_stream_of(path); fd >= 0) return write_to_descriptor(fd, path, text);
  if (is_device_or_pipe(path)) return write_through(path, text, 0);
  // Replace the file the link names, not the link (which would become a regular file).
  return write_file_atomic(resolved.path, text);
}

bool writes_to_standard_output(const std::string& path) {
  struct stat out {};
  if (::fstat(1, &out) != 0) return false;
  auto resolved = resolve(path);
  if (resolved.is_ok() && resolved->descriptor && resolved->descriptor->own) {
    struct stat target {};
    return ::fstat(resolved->descriptor->fd, &target) == 0 && target.st_dev == out.st_dev &&
           target.st_ino == out.st_ino;
  }
  return standard_stream_of(path) == 1;
}

Status check_output_file_can_be_written(const std::string& path, const std::string& what) {
  std::error_code ec;
  // A folder is refused by name (is_special_file counts it as no regular file).
  if (std::filesystem::is_directory(path, ec)) return check_file_can_be_written(path, what);
  // resolve, not resolve_links: a link loop was passed over as "no link", and failed the
  // export after the run (review, 2026-12-07).
  auto resolved = resolve(path);
  if (!resolved.is_ok()) return resolved.status().with_context(fmt::format("{} '{}'", what, path));
  if (resolved->descriptor && resolved->descriptor->own) {
    // One of this process's descriptors, written where it stands: it must be open for writing
    // now (/dev/fd/9 unopened, or a closed standard output, failed after the run).
    const int flags = ::fcntl(resolved->descriptor->fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
      return Status::error("{} '{}': descriptor {} is not open for writing", what, path,
                           resolved->descriptor->fd);
    }
    return Status::ok();
  }
  if (resolved->descriptor || is_special_file(path)) return Status::ok();  // written in place
  if (resolved->path == path) return check_file_can_be_written(path, what);
  return check_file_can_be_written(resolved->path, fmt::format("{} '{}', a link to", what, path));
}

}  // namespace sparq
