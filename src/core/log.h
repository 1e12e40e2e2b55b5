// Process-wide logging on top of spdlog. Every line carries a "[rank r/P]" prefix. By
// default only rank 0 logs at info level; other ranks log warnings and errors, unless
// `all_ranks` is set (useful when debugging a hang on one rank).
//
// The logger is the one global sparq keeps; it also remembers this process's rank and host
// so that failed checks can name them.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace sparq::log {

struct Options {
  int rank = 0;
  int world_size = 1;
  std::string level = "info";  // trace, debug, info, warn, error, off
  bool all_ranks = false;
};

// Re-installs the default spdlog logger with the rank prefix. Safe to call again (for
// example once MPI knows the rank).
void init(const Options& options);

int rank();
int world_size();
const std::string& host_name();

}  // namespace sparq::log
