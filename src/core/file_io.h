// Whole-file helpers for every module (data shards and vocabularies, checkpoints, exports).
// Every failure is a Status whose message names the path and the OS error.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace sparq {

// The whole file as bytes.
Result<std::string> read_file(const std::string& path);

// Writes `bytes` to path + ".tmp", flushes and fsyncs it, then renames it over `path`, so a
// reader (or a crash) sees either the old file or the complete new one, never a partial
// file. On failure the temporary file is removed and `path` is left untouched. The parent
// directory must exist.
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace sparq
