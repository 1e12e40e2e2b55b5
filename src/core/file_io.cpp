#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/fault.h"

namespace sparq {
namespace {

// A pipe, FIFO or character device has no size to read up front: read to the end, up to a
// bound (so /dev/zero is an error, not an endless allocation). `train --config <(...)` is a
// pipe; it used to fail with "cannot determine the size" (review, 2026-12-05).
Result<std::string> read_stream(const std::string& path) {
  constexpr std::size_t kMaxStreamBytes = std::size_t{1} << 30;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot open '{}': {}", path, std::strerror(errno));
  std::string bytes;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    bytes.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > kMaxStreamBytes) {
      return Status::error(
          "cannot read '{}': it is not a regular file and gives more than "
          "{} bytes",
          path, kMaxStreamBytes);
    }
  }
  if (in.bad()) return Status::error("cannot read '{}': {}", path, std::strerror(errno));
  return bytes;
}

}  // namespace

Result<std::string> read_file(const std::string& path) {
  // A directory opens as a stream whose "size" is huge: the allocation below would throw
  // out of a function whose callers expect a Status (a config path, an init_from, a vocab).
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::error("cannot read '{}': it is a directory, not a file", path);
  }
  if (!std::filesystem::is_regular_file(path, ec) && std::filesystem::exists(path, ec)) {
    return read_stream(path);
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::error("cannot open '{}': {}", path, std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) return Status::error("cannot determine the size of '{}'", path);
  std::string bytes;
  try {
    bytes.resize(static_cast<std::size_t>(size));
  } catch (const std::exception&) {  // std::bad_alloc, std::length_error
    return Status::error("cannot read '{}': {} bytes do not fit in memory", path, size);
  }
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size)) {
    return Status::error("short read from '{}' (expected {} bytes)", path, size);
  }
  return bytes;
}

Result<int> create_fresh_file(const std::string& path) {
  // A stale file (an earlier write killed part-way) might be read-only or a hard link
  // shared with something else: unlink it rather than truncate it in place.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::error("cannot remove the stale '{}': {}", path, std::strerror(errno));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error("cannot create '{}': {}", path, std::strerror(errno));
  return fd;
}

Status sync_directory(const std::string& dir) {
  const std::string name = dir.empty() ? "." : dir;
  const int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::error("cannot open directory '{}': {}", name, std::strerror(errno));
  int err = 0;
  if (::fsync(fd) != 0 && errno != EINVAL) err = errno;
  ::close(fd);  // read-only: nothing to lose on close
  if (err != 0) {
    return Status::error("fsync of directory '{}' failed: {}", name, std::strerror(err));
  }
  return Status::ok();
}

namespace {

// A fault point of `how`, or false when it has none.
bool fault_at(const AtomicWrite& how, std::string_view what) {
  if (how.fault_prefix.empty()) return false;
  return fault::point(std::string(how.fault_prefix) + "." + std::string(what), how.fault_step);
}

// Writes all of `bytes` to a new file `tmp`, fsyncs and closes it; the caller removes it on
// failure.
Status write_and_sync(const std::string& tmp, std::string_view bytes, const AtomicWrite& how) {
  SPARQ_ASSIGN_OR_RETURN(const int fd, create_fresh_file(tmp));
  const std::size_t chunk = std::max<std::size_t>(how.chunk_bytes, 1);
  std::size_t done = 0;
  while (done < bytes.size()) {
    if (fault_at(how, "write")) {
      ::close(fd);
      return Status::error("write to '{}' failed after {} of {} bytes: injected fault "
                           "(SPARQ_FAULT {}.write)",
                           tmp, done, bytes.size(), how.fault_prefix);
    }
    const std::size_t want = std::min(chunk, bytes.size() - done);
    const ssize_t n = ::write(fd, bytes.data() + done, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // write() returns 0 only for a zero-length request; treat it as "no space" rather
      // than spinning.
      const int err = n == 0 ? ENOSPC : errno;
      ::close(fd);
      return Status::error("write to '{}' failed after {} of {} bytes: {}", tmp, done,
                           bytes.size(), std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  // Without fsync a crash after the rename could leave an empty or partial file in place;
  // on some filesystems (NFS, delayed allocation) this is also where a full disk shows.
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::error("fsync of '{}' failed ({} bytes written): {}", tmp, bytes.size(),
                         std::strerror(err));
  }
  if (::close(fd) != 0) {
    return Status::error("close of '{}' failed ({} bytes written): {}", tmp, bytes.size(),
                         std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace

Status write_file_atomic(const std::string& path, std::string_view bytes, const AtomicWrite& how) {
  const std::string tmp = path + ".tmp";
  Status written = write_and_sync(tmp, bytes, how);
  if (written.is_ok() && fault_at(how, "rename")) {
    written = Status::error("rename of '{}' failed: injected fault (SPARQ_FAULT {}.rename)", tmp,
                            how.fault_prefix);
  }
  if (!written) {
    std::remove(tmp.c_str());
    return written;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Status::error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(err));
  }
  // Persist the rename itself: until the directory is synced, a power cut may bring back
  // the old file (or none) even though this call reported success.
  return sync_directory(std::filesystem::path(path).parent_path().string())
      .with_context("after writing '" + path + "'");
}

}  // namespace sparq
