// An MPI communicator over a communicator the program made (a sub-communicator from
// MPI_Comm_split, say, so that one MPI job trains several models side by side): for builds
// with MPI, and for programs that include <mpi.h> themselves; mpi_communicator.h's factory
// always takes MPI_COMM_WORLD.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/mpi_communicator.h"

namespace sparq::comm {

// A communicator on a private duplicate of `parent` (sparq's traffic never matches the
// program's messages), ranked as in `parent`. MPI must be initialised, by the program (which
// also finalises it), with at least MPI_THREAD_SERIALIZED. The rest is
// make_mpi_communicator()'s: the fatal handler still aborts MPI_COMM_WORLD, since a failed
// rank leaves the whole job waiting, and log lines name the rank within `parent`.
Result<std::unique_ptr<Communicator>> make_mpi_communicator_on(MPI_Comm parent,
                                                               MpiOptions options = {});

}  // namespace sparq::comm
