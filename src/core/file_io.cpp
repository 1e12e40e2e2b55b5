#include "core/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

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

// Pseudo-files whose stat size is not their content's: procfs reports 0 (read as an empty
// file before), sysfs a page (a "short read" error). They are read as streams, to EOF.
bool reports_no_true_size(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return false;  // open() reports the real problem
  constexpr long kProcMagic = 0x9fa0, kSysfsMagic = 0x62656572;
  return fs.f_type == kProcMagic || fs.f_type == kSysfsMagic;
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
  if (reports_no_true_size(path)) return read_stream(path);
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

Status check_file_can_be_written(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::error("{} '{}' is a folder, not a file name", what, path);
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string folder = parent.empty() ? std::string(".") : parent.string();
  if (!std::filesystem::is_directory(folder, ec)) {
    return Status::error("{} '{}': the folder '{}' does not exist", what, path, folder);
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return Status::error("{} '{}': cannot create files in '{}': {}", what, path, folder,
                         std::strerror(errno));
  }
  return Status::ok();
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

std::size_t write_fully(int fd, std::string_view bytes, int* error) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // write() returns 0 only for a zero-length request; taken as "no space" rather than
      // spinning.
      *error = n == 0 ? ENOSPC : errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

namespace {

// A fault point of `how`, or false when it has none.
bool fault_at(const AtomicWrite& how, std::string_view what) {
  if (how.fault_prefix.empty()) return false;
  return fault::point(std::string(how.fault_prefix) + "." + std::string(what), how.fault_step);
}

// A name for the new file that no other writer of `path` uses: 64 random bits (a process id
// and a count were not enough: two containers' writers are both pid 1, two hosts' writers of
// one NFS folder may share a pid; review, 2026-12-06). Never unlinked before use: it is made
// with O_EXCL, or linked, and a collision draws another.
std::string private_temp_name(const std::string& path) {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof(bits), 0) != static_cast<ssize_t>(sizeof(bits))) {
    static std::atomic<std::uint64_t> count{0};  // no entropy source: time, pid and a count
    bits = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<std::uint64_t>(::getpid()) << 40) ^ count.fetch_add(1);
  }
  return fmt::format("{}.tmp.{:016x}", path, bits);
}

std::size_t total_size(std::span<const std::string_view> pieces) {
  std::size_t total = 0;
  for (const std::string_view piece : pieces) total += piece.size();
  return total;
}

// Writes all of `pieces`, one after another, to `fd` in chunks of the whole stream and fsyncs
// it; `shown` names the file in errors. The caller closes fd.
Status write_and_sync(int fd, const std::string& shown, std::span<const std::string_view> pieces,
                      const AtomicWrite& how) {
  const std::size_t chunk = std::max<std::size_t>(how.chunk_bytes, 1);
  const std::size_t total = total_size(pieces);
  std::size_t done = 0, piece = 0, offset = 0;  // offset: into pieces[piece]
  while (done < total) {
    if (fault_at(how, "write")) {
      return Status::error(
          "write to {} failed after {} of {} bytes: injected fault "
          "(SPARQ_FAULT {}.write)",
          shown, done, total, how.fault_prefix);
    }
    // One chunk of the stream, which may span several pieces.
    for (std::size_t left = std::min(chunk, total - done); left > 0;) {
      while (offset == pieces[piece].size()) ++piece, offset = 0;
      const std::string_view part = pieces[piece].substr(offset, left);
      int err = 0;
      const std::size_t n = write_fully(fd, part, &err);
      done += n, offset += n, left -= n;
      if (n < part.size()) {
        return Status::error("write to {} failed after {} of {} bytes: {}", shown, done, total,
                             std::strerror(err));
      }
    }
  }
  // Without fsync a crash after the rename could leave an empty or partial file in place;
  // on some filesystems (NFS, delayed allocation) this is also where a full disk shows.
  if (::fsync(fd) != 0) {
    return Status::error("fsync of {} failed ({} bytes written): {}", shown, total,
                         std::strerror(errno));
  }
  if (fault_at(how, "rename")) {
    return Status::error("rename of {} failed: injected fault (SPARQ_FAULT {}.rename)", shown,
                         how.fault_prefix);
  }
  return Status::ok();
}

Status close_checked(int fd, const std::string& shown, std::size_t bytes) {
  if (::close(fd) != 0) {
    return Status::error("close of {} failed ({} bytes written): {}", shown, bytes,
                         std::strerror(errno));
  }
  return Status::ok();
}

// Gives the unnamed file `fd` a fresh private name: through its /proc/self/fd entry (any user),
// or AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH) where /proc is not mounted. Empty when neither
// can name it here (ENOENT, EPERM: the caller writes a named file instead); an error for any
// other failure (a full disk, a quota), naming it.
Result<std::string> link_unnamed(int fd, const std::string& path) {
  const std::string proc = fmt::format("/proc/self/fd/{}", fd);
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::string name = private_temp_name(path);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      return name;
    }
    // The /proc link's own failure decides, unless /proc could not name the file (not
    // mounted, not allowed): AT_EMPTY_PATH is the fallback for that case only. Both were
    // tried on any failure and the second's errno reported, so a full disk or a taken name
    // read as "cannot name here" and the file was written a second time (review, 2026-12-06).
    int error = errno;
    if (error == ENOENT || error == EPERM || error == EACCES) {
      if (::linkat(fd, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) return name;
      error = errno;
    }
    if (error == EEXIST) continue;
    if (error == ENOENT || error == EPERM || error == EACCES) return std::string();
    return Status::error("cannot name the new contents of '{}' as '{}': {}", path, name,
                         std::strerror(error));
  }
  return Status::error("cannot name the new contents of '{}': 8 random names were taken", path);
}

// Gives the new file the replaced file's permission bits (`mode`; none for a new path, which
// keeps the 0644 & ~umask it was created with). A filesystem without Unix modes (EPERM,
// EOPNOTSUPP: vfat, some FUSE) cannot keep them and keeps none anyway: not an error there.
Status keep_mode(int fd, const std::string& shown, std::optional<mode_t> mode) {
  if (!mode || ::fchmod(fd, *mode) == 0 || errno == EPERM || errno == EOPNOTSUPP) {
    return Status::ok();
  }
  return Status::error("cannot give {} the mode {:o} of the file it replaces: {}", shown, *mode,
                       std::strerror(errno));
}

// The new file, complete and fsynced, under a private name (the caller renames it): an unnamed
// file given its name only once complete, or, where the filesystem has no unnamed files (or
// one cannot be named), a private name from the start. Each fault point is met once a call.
Result<std::string> write_private_file(const std::string& path,
                                       std::span<const std::string_view> bytes,
                                       const AtomicWrite& how, std::optional<mode_t> mode) {
  const std::size_t total = total_size(bytes);
  const std::string shown = fmt::format("'{}' (its new contents, not yet in place)", path);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  AtomicWrite again = how;
  if (how.unnamed_file) {
    const int unnamed = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (unnamed < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      return Status::error("cannot create '{}' in '{}': {}", path, dir, std::strerror(errno));
    }
    if (unnamed >= 0) {
      Status written = keep_mode(unnamed, shown, mode);
      if (written.is_ok()) written = write_and_sync(unnamed, shown, bytes, how);
      std::string name;
      if (written.is_ok()) {
        auto linked = link_unnamed(unnamed, path);
        if (linked.is_ok())
          name = std::move(linked).value();
        else
          written = linked.status();
      }
      const Status closed = close_checked(unnamed, shown, total);
      if (!written.is_ok()) return written;
      if (!name.empty() && !closed.is_ok()) std::remove(name.c_str());
      if (!closed.is_ok()) return closed;
      if (!name.empty()) return name;
      // No way to name it here: the bytes again, under a private name, past the fault points
      // this call has met already.
      again.fault_prefix = {};
    }
  }
  SPARQ_ASSIGN_OR_RETURN(auto created, create_private_file(path));
  const auto& [fd, name] = created;
  Status written = keep_mode(fd, shown, mode);
  if (written.is_ok()) written = write_and_sync(fd, shown, bytes, again);
  const Status closed = close_checked(fd, shown, total);
  if (written.is_ok()) written = closed;
  if (!written.is_ok()) {
    std::remove(name.c_str());
    return written;
  }
  return name;
}

}  // namespace

Result<std::pair<int, std::string>> create_private_file(const std::string& path) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = private_temp_name(path);
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return std::pair{fd, std::move(name)};
    if (errno != EEXIST) {
      return Status::error("cannot create '{}': {}", name, std::strerror(errno));
    }
  }
  return Status::error("cannot create a file beside '{}': 8 random names were taken", path);
}

std::vector<std::string> private_temporaries(const std::string& path) {
  const std::filesystem::path p(path);
  // private_temp_name's form: path + ".tmp." + 16 hex digits.
  const std::string prefix = p.filename().string() + ".tmp.";
  std::vector<std::string> found;
  std::error_code ec;
  const std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == prefix.size() + 16 && name.starts_with(prefix) &&
        name.find_first_not_of("0123456789abcdef", prefix.size()) == std::string::npos) {
      found.push_back((p.parent_path() / name).string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

Status write_file_atomic(const std::string& path, std::string_view bytes, const AtomicWrite& how) {
  const std::string_view pieces[] = {bytes};
  return write_file_atomic(path, std::span<const std::string_view>(pieces), how);
}

Status write_file_atomic(const std::string& path, std::span<const std::string_view> bytes,
                         const AtomicWrite& how) {
  // Note [Atomic writes without a shared temporary name] (file_io.h). path + ".tmp" is not
  // touched: it may be another writer's (the shard writer's, data/shard.h) or the user's own
  // file; it used to be removed as an earlier version's leftover (review, 2026-12-06).
  // Replacing a file keeps its permission bits (a shared 0664 file used to become 0644).
  std::optional<mode_t> mode;
  struct stat existing {};
  if (::stat(path.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) {
    mode = existing.st_mode & 0777;  // not set-id bits: the new file is the writer's
  }
  SPARQ_ASSIGN_OR_RETURN(const std::string tmp, write_private_file(path, bytes, how, mode));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Status::error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(err));
  }
  // Persist the rename itself: until the directory is synced, a power cut may bring back
  // the old file (or none) even though this call reported success.
  return sync_directory(std::filesystem::path(path).parent_path().string())
      .with_context(fmt::format("'{}' holds the new contents, but its directory was not synced, "
                                "so a power cut may undo that",
                                path));
}

}  // namespace sparq
