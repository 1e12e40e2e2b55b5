// How the MPI backend starts: MPI initialised (or taken from the program), the process-wide
// fatal handler and logging set for the rank, and the communicator made on a duplicate of the
// parent. The communicator itself is comm/mpi_communicator.cpp.
#include <cstdlib>
#include <memory>
#include <string>

#include "comm/mpi_communicator.h"
#include "comm/mpi_communicator_on.h"
#include "comm/mpi_support.h"
#include "core/fatal.h"
#include "core/fault.h"
#include "core/log.h"

namespace sparq::comm {
namespace {

using mpi_support::mpi_alive;
using mpi_support::thread_level_name;

void abort_all_ranks(int exit_code) {
  if (mpi_alive()) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

// Open MPI 4.1's TCP BTL moves a large message over one connection in one direction at a time
// when it uses its put protocol: on the emulated cluster (docs/cluster.md) a 25.8 MB
// allreduce between 2 nodes at 100 Mbit/s took 4.3 s instead of the link's 2.2 s, on sparq's
// duplicated communicator whatever btl_tcp_links, coll component or algorithm. Without put
// (btl_tcp_flags send,inplace,need-ack,need-csum) it runs at the link rate: a gpt2-tiny dense
// step went from 5.0 s to 3.9 s. A btl_tcp_flags the user chose (mpirun --mca, which reaches
// the ranks as this variable, or the environment) is kept. Shared memory is unaffected.
// Note [MPI lives until exit]
// MPI is initialised at most once per process, and once finalised it cannot be used again.
// When sparq initialises it (no host program did), it finalises it at process exit, not when
// the communicator that initialised it is destroyed: an embedder may make communicators one
// after another (one per emulated link, one per run) or call train_main() twice, and the
// second found MPI finalised (review, 2026-12-06). MPI initialised by the host is the host's
// to finalise. Every MPI handle a communicator owns is freed only while MPI is alive
// (mpi_alive()), so a communicator still alive at exit is harmless.
void finalize_mpi_at_exit() {
  if (mpi_alive()) MPI_Finalize();
}

void prefer_full_duplex_tcp() {
#ifdef OMPI_MAJOR_VERSION
  setenv("OMPI_MCA_btl_tcp_flags", "send,inplace,need-ack,need-csum", /*overwrite=*/0);
#endif
}

// The communicator on a duplicate of `parent`, once MPI's thread level is known to do.
Result<std::unique_ptr<Communicator>> communicator_on(MPI_Comm parent, int provided,
                                                      MpiOptions options, const char* caller) {
  if (provided < MPI_THREAD_SERIALIZED) {
    return Status::error(
        "{}: MPI provides {}, but sparq's communication thread needs at "
        "least MPI_THREAD_SERIALIZED (initialise MPI with MPI_THREAD_MULTIPLE)",
        caller, thread_level_name(provided));
  }
  set_fatal_handler(&abort_all_ranks);
  auto comm = mpi_support::new_mpi_communicator(parent, provided, options);
  fault::set_rank(comm->rank());
  const auto level = spdlog::default_logger()->level();
  log::init({.rank = comm->rank(),
             .world_size = comm->size(),
             .level = std::string(spdlog::level::to_string_view(level).data(),
                                  spdlog::level::to_string_view(level).size())});
  if (provided < MPI_THREAD_MULTIPLE) {
    spdlog::warn(
        "MPI provides {} only: every MPI call is serialised; route all communication "
        "through one CommEngine",
        thread_level_name(provided));
  }
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace

bool mpi_in_use() { return mpi_alive(); }

Result<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc, char*** argv,
                                                            MpiOptions options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return Status::error("make_mpi_communicator: MPI has already been finalised");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    prefer_full_duplex_tcp();
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      return Status::error("make_mpi_communicator: MPI_Init_thread failed with code {}", rc);
    }
    std::atexit(finalize_mpi_at_exit);  // Note [MPI lives until exit]
  } else {
    MPI_Query_thread(&provided);
  }
  return communicator_on(MPI_COMM_WORLD, provided, options, "make_mpi_communicator");
}

Result<std::unique_ptr<Communicator>> make_mpi_communicator_on(MPI_Comm parent,
                                                               MpiOptions options) {
  if (!mpi_alive()) {
    return Status::error(
        "make_mpi_communicator_on: MPI is not initialised (or already finalised): the program "
        "that made the parent communicator initialises MPI");
  }
  if (parent == MPI_COMM_NULL) {
    return Status::error("make_mpi_communicator_on: the parent communicator is MPI_COMM_NULL");
  }
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return communicator_on(parent, provided, options, "make_mpi_communicator_on");
}

}  // namespace sparq::comm
