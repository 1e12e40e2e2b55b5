// Small file helpers shared by the data module; every failure names the path.
#pragma once

#include <string>

#include "core/status.h"

namespace sparq::data {

// The whole file as bytes.
Result<std::string> read_file(const std::string& path);
// Writes to path + ".tmp" then renames, so readers never see a half-written file.
Status write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace sparq::data
