// Where the apps write a file a user names: simulate --csv, sim_profile --out, and train's
// --export-safetensors and log.trace (a link or a device was replaced by a regular file:
// review, 2026-12-06).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace sparq {

// Writes `text` as the whole content of `path`, checking every write:
//   - a descriptor of this process (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N,
//     /proc/<its pid>/fd/N), or a path that is the same file as its standard output or error
//     (`--csv log.txt >> log.txt`): written through that descriptor, at its offset (the end,
//     under >>), after stdio's buffers. Following /dev/stdout to the file the shell opened
//     and renaming a new file over it lost what was written there before and the tables
//     printed after it (review, 2026-12-06);
//   - another process's descriptor (/proc/<pid>/fd/N): opened and appended to, never replaced;
//   - a regular file, or a path that does not exist yet: atomically (write_file_atomic,
//     core/file_io.h), so a failed write (a full disk, a file size limit) leaves an earlier file
//     as it was; through a symbolic link, the file it names is replaced and the link kept;
//   - anything else that exists (a pipe, a terminal, /dev/null): written through in place. It
//     has no earlier content to keep, and the atomic rename would put a regular file in its
//     place (as root, even over /dev/stdout).
// Errors name the path and the OS error.
Status write_output_file(const std::string& path, std::string_view text);

// For a writer that appends to `path` (log.metrics): a descriptor of this process, or the file
// standard output or error writes to (write_output_file's first case), as a dup() of that
// descriptor, so that records and the stream's own output share one offset (opened anew,
// /dev/stdout had an offset of its own and O_TRUNC: the run's summary overwrote records, and
// `>>` lost what the file held: review, 2026-12-06). -1 for any other path (links followed),
// which the caller opens itself; -1 with errno set when the dup fails.
int duplicate_stream_descriptor(const std::string& path);

// `path` with its symbolic links followed (a link to a file not written yet too), or `path`
// itself when it is no link or cannot be resolved.
std::string resolve_links(const std::string& path);

// Whether `path` is not a file to replace: it exists and, following symbolic links, is not a
// regular file, or it names a descriptor or the file of standard output or error (above).
bool is_special_file(const std::string& path);

// Whether write_output_file(path, ...) writes where standard output goes (/dev/stdout,
// /dev/fd/1, a path the shell redirected standard output to): a program that writes such a
// file must print its own report elsewhere (train's summary line followed an export to
// /dev/stdout, and the file no longer loaded: review, 2026-12-07).
bool writes_to_standard_output(const std::string& path);

// Whether write_output_file(path, ...) could write `path` now, for outputs written at the end
// of long work and checked at its start: a descriptor, device or pipe is written in place (no
// folder to check); otherwise the folder of the file a symbolic link names, where the file
// will be created (the folder of the link itself was checked, so a link into a folder that
// does not exist passed, and the export failed after the whole run; /dev/stdout needed write
// access to /dev and was refused for users other than root: review, 2026-12-07). `what`
// names the path in the error, as check_file_can_be_written's (core/file_io.h).
Status check_output_file_can_be_written(const std::string& path, const std::string& what);

}  // namespace sparq
