// The data module's file helpers now live in core/file_io.h (checkpoints need them too);
// this header keeps the data::read_file / data::write_file_atomic spellings working.
#pragma once

#include "core/file_io.h"

namespace sparq::data {

using ::sparq::read_file;
using ::sparq::write_file_atomic;

}  // namespace sparq::data
