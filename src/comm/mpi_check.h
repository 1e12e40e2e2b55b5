// MPI_CHECK: a failing MPI call ends the job (through the fatal handler, i.e. MPI_Abort, so
// no rank is left waiting in a collective) naming the call, MPI's error string, rank and
// file:line. sparq's communicators set MPI_ERRORS_RETURN on their handles so that errors
// reach this check instead of MPI's default silent abort.
#pragma once

#include <mpi.h>

namespace sparq::comm {

[[noreturn]] void mpi_call_failed(const char* call, int code, const char* file, int line);

}  // namespace sparq::comm

#define MPI_CHECK(call)                                                         \
  do {                                                                          \
    const int sparq_mpi_rc_ = (call);                                           \
    if (sparq_mpi_rc_ != MPI_SUCCESS)                                           \
      ::sparq::comm::mpi_call_failed(#call, sparq_mpi_rc_, __FILE__, __LINE__); \
  } while (0)
