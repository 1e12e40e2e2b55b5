// make_mpi_communicator() for builds without MPI: an expected failure the application reports
// (run with the self communicator, or rebuild with SPARQ_MPI=ON).
#include "comm/mpi_communicator.h"

namespace sparq::comm {

Result<std::unique_ptr<Communicator>> make_mpi_communicator(int*, char***, MpiOptions) {
  return Status::error(
      "make_mpi_communicator: sparq was built without MPI (configure with -DSPARQ_MPI=ON)");
}

bool mpi_in_use() { return false; }

}  // namespace sparq::comm
