// Invariant checks that end the whole job. A failed check prints rank, host, file:line and
// the message, then calls the registered fatal handler (MPI_Abort once comm is up) so that
// no other rank is left hanging in a collective. Use Status (status.h) for expected failures.
#pragma once

#include <fmt/format.h>

#include "core/fatal.h"

#define SPARQ_CHECK(cond, ...)                                                      \
  do {                                                                              \
    if (!(cond)) [[unlikely]] {                                                     \
      ::sparq::fatal_error(__FILE__, __LINE__,                                      \
                           "check failed: " #cond " " __VA_OPT__(+ fmt::format(__VA_ARGS__))); \
    }                                                                               \
  } while (0)

#define SPARQ_FATAL(...) ::sparq::fatal_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__))
