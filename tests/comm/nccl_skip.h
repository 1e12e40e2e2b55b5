// When a multi-rank NCCL test may skip, for the MPI tests of the NCCL backend (nccl_test.cpp,
// stream_engine_test.cpp). Include only where SPARQ_HAS_NCCL and MPI are both present.
#pragma once

#include <mpi.h>

#include "core/cuda/cuda_handles.h"

namespace sparq::comm::testing {

// The one reason such a test skips once every rank has a device: this node runs more ranks
// than it has GPUs (NCCL allows one rank per GPU: a one-GPU machine at np 2). Any other failure
// to build the communicator fails the test (review, 2026-12-05: every error was a skip, so a
// broken device mapping or init passed as skipped). Collective: call on every rank.
inline bool fewer_gpus_than_ranks_on_this_node() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int ranks_here = 1;
  MPI_Comm_size(node, &ranks_here);
  MPI_Comm_free(&node);
  return ranks_here > cuda::device_count();
}

}  // namespace sparq::comm::testing
