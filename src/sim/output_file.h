// Where the simulator's apps write their files (simulate --csv, sim_profile --out).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace sparq::sim {

// Writes `text` as the whole content of `path`, checking every write:
//   - a regular file, or a path that does not exist yet: atomically (write_file_atomic,
//     core/file_io.h), so a failed write (a full disk, a file size limit) leaves an earlier file
//     as it was; through a symbolic link, the file it names is replaced and the link kept;
//   - anything else that exists (/dev/stdout, a pipe, a terminal, /dev/null): written through
//     in place. It has no earlier content to keep, and the atomic rename would put a regular
//     file in its place (as root, even over /dev/stdout).
// Errors name the path and the OS error.
Status write_output_file(const std::string& path, std::string_view text);

// Whether `path`, following symbolic links, exists and is not a regular file.
bool is_special_file(const std::string& path);

}  // namespace sparq::sim
