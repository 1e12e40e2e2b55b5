// Whole-file helpers for every module (data shards and vocabularies, checkpoints, exports).
// Every failure is a Status whose message names the path and the OS error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace sparq {

// The whole file as bytes.
Result<std::string> read_file(const std::string& path);

// How write_file_atomic() writes; the defaults suit every caller but checkpoints.
struct AtomicWrite {
  // write() is called with at most this many bytes at a time, so a fault test can stop a
  // large write part-way (and a full disk is detected within one chunk).
  std::size_t chunk_bytes = std::size_t{1} << 20;
  // Fault injection (core/fault.h): when not empty, "<fault_prefix>.write" is hit before each
  // chunk and "<fault_prefix>.rename" once the data is fsynced, just before the rename;
  // `fault_step` is the step they report. action=fail there behaves like a failed write.
  std::string_view fault_prefix;
  std::int64_t fault_step = -1;
  // false: a named private file from the start, as on a filesystem without unnamed files (for
  // tests of that path; Note [Atomic writes without a shared temporary name]).
  bool unnamed_file = true;
};

// Writes `bytes` to a new file in path's directory in chunks, fsyncs and closes it, renames
// it over `path`, then fsyncs the directory, so a reader (or a crash, or a power cut) sees
// either the old file or the complete new one, never a partial file. Every write, fsync and
// close is checked: an error names the file, how many of how many bytes were written and the
// OS error ("No space left on device", "File too large"). On failure the new file is removed
// and `path` is left untouched, with one exception: when only the final fsync of the
// directory fails, `path` already holds the new contents and the error says so. The parent
// directory must exist.
//
// Note [Atomic writes without a shared temporary name]
// The new file is unnamed (O_TMPFILE) until it is complete, then linked under a private name,
// path + ".tmp." + 16 random hex digits, and renamed over `path` at once; where the filesystem
// has no unnamed files (NFS, some FUSE) it has that private name from the start, created with
// O_EXCL. Two writers of one path (two jobs given one output folder, on one host or several)
// therefore never touch each other's file, and the last rename wins with a complete file:
// with the one shared path + ".tmp" of before (review, 2026-12-06), a writer unlinked the
// other's file part-way and one renamed the other's half-written file into place while
// reporting success. A crash mid-write leaves nothing behind on a filesystem with unnamed
// files (but for the instant between the link and the rename); without them it leaves its
// path.tmp.<hex> file, which nothing removes (no writer can tell another's live file from a
// dead one's; a checkpoint's retention removes it with its step directory). A path + ".tmp"
// is never touched (another writer's, such as the shard writer's, or the user's; one left by a
// version before 2026-12-06 stays). Replacing a regular file keeps its permission bits; a new
// file is 0644 less the umask.
Status write_file_atomic(const std::string& path, std::string_view bytes,
                         const AtomicWrite& how = {});

// A new empty file beside `path` under a private name, path + ".tmp." + 16 random hex digits,
// created with O_EXCL (never over another writer's), and its descriptor open for writing: for
// writers that stream a file too large to hold and rename it over `path` themselves (the shard
// writer, data/shard.h). Note [Atomic writes without a shared temporary name].
Result<std::pair<int, std::string>> create_private_file(const std::string& path);
// The files under such private names beside `path` (sorted): another writer's, still writing
// or killed before its rename.
std::vector<std::string> private_temporaries(const std::string& path);
// The same for the concatenation of `pieces`, never assembled in memory: a checkpoint's image
// was a second copy of everything it saves (about 4 GB more at each save of GPT-2 124M with
// Adam and a residual: review, 2026-12-07). Chunks and fault points count over the whole
// stream, as for one buffer holding it.
Status write_file_atomic(const std::string& path, std::span<const std::string_view> pieces,
                         const AtomicWrite& how = {});

// write(2) until every byte of `bytes` is written or a call fails (EINTR is retried): the
// bytes written; when fewer than all, *error holds the failure's errno (ENOSPC for a call
// that wrote nothing). The loop every writer of a buffer to a descriptor shares.
std::size_t write_fully(int fd, std::string_view bytes, int* error);

// Whether write_file_atomic(path, ...) could place a file at `path` now: its folder exists, is
// a folder this process may create files in, and `path` is not a folder. For outputs written
// at the end of long work, checked at its start. `what` names the path in the error.
Status check_file_can_be_written(const std::string& path, const std::string& what);

// fsyncs a directory, making the creation, rename or removal of its entries durable.
// Filesystems that cannot fsync a directory (EINVAL) count as success.
Status sync_directory(const std::string& dir);

}  // namespace sparq
