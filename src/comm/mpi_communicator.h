// The MPI backend: collectives on HOST buffers over a private duplicate of MPI_COMM_WORLD, or
// of a communicator the program made (mpi_communicator_on.h), so sparq's traffic never
// matches anyone else's messages.
//
// Initialisation: make_mpi_communicator() initialises MPI with MPI_THREAD_MULTIPLE unless it
// is already initialised (for example by tests/common/mpi_test_main.cpp or by an
// application). MPI that the factory initialised is finalised at process exit, not with the
// communicator, so communicators may be made one after another (Note [MPI lives until exit],
// mpi_startup.cpp); MPI the application initialised is the application's to finalise.
// The factory also
//   - installs a fatal handler that calls MPI_Abort(MPI_COMM_WORLD), so a failed
//     SPARQ_CHECK/MPI_CHECK/CommEngine timeout on any rank ends every rank, and
//   - re-initialises the logger with this process's rank and world size.
//
// Threading: one thread at a time per communicator (its scratch and byte counters are not
// shared-safe, and MPI pairs a communicator's collectives in the order they are issued, so two
// threads on one communicator could pair them differently on different ranks); with
// MPI_THREAD_MULTIPLE, different communicators may be called from different threads.
// When the library provides only MPI_THREAD_SERIALIZED, every call takes a process-wide lock;
// then all communication should go through one CommEngine (whose thread serialises it), since
// two threads issuing collectives in different orders on different ranks would deadlock
// (Note [Rank-identical collective order], communicator.h).
// Less than MPI_THREAD_SERIALIZED is refused (the engine thread could not call MPI at all).
//
// f16 and bf16 travel as 16-bit payloads and are summed by a user-defined MPI_Op that adds in
// f32 and rounds each partial sum back to 16 bits. kAvg divides the sum by size() in f32.
// Counts above INT_MAX elements are split into several calls for allreduce, broadcast and
// send/recv; the other collectives refuse them with a message naming the call.
//
// Allreduce algorithm (MpiOptions::allreduce): kMpi calls MPI_Allreduce; kRing runs sparq's
// own pipelined ring (comm/mpi_ring.h: bandwidth-optimal, 2(P-1) latencies, its own
// duplicate communicator, the same per-element sums and kAvg division); kAuto picks kMpi
// below a message size and kRing from it on, by a crossover measured with bench_comm
// (auto_ring_threshold_bytes in ring_threshold.h, with its figures). The choice depends only on the
// byte count and size(), identical on every rank (Note [Rank-identical collective order]).
// Bytes are counted by the ring model (comm/byte_model.h) whichever algorithm runs; for
// kRing that is exactly what goes on the wire.
//
// In-place forms (besides allreduce's in == out): allgather with in == out + rank * count,
// allgatherv with in == out + displs[rank], reduce_scatter with out == in + offset[rank],
// alltoall(v) with in == out. Any other overlap of input and output is staged through a
// temporary copy.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "comm/communicator.h"
#include "core/status.h"

namespace sparq::comm {

enum class AllreduceAlgorithm { kAuto, kMpi, kRing };

// The config names (comm.allreduce): "auto", "mpi", "ring"; nullopt for anything else.
inline std::optional<AllreduceAlgorithm> allreduce_algorithm_from_name(std::string_view name) {
  if (name == "auto") return AllreduceAlgorithm::kAuto;
  if (name == "mpi") return AllreduceAlgorithm::kMpi;
  if (name == "ring") return AllreduceAlgorithm::kRing;
  return std::nullopt;
}

// How the backend waits for its transfers (comm.mpi_wait): kBusy calls MPI's blocking
// collectives, which poll; kSleep starts non-blocking ones and tests them with growing pauses
// (Note [Waiting for MPI], comm/mpi_wait.h).
enum class MpiWait { kBusy, kSleep };

// The config names (comm.mpi_wait): "busy", "sleep"; nullopt for anything else.
inline std::optional<MpiWait> mpi_wait_from_name(std::string_view name) {
  if (name == "busy") return MpiWait::kBusy;
  if (name == "sleep") return MpiWait::kSleep;
  return std::nullopt;
}

struct MpiOptions {
  AllreduceAlgorithm allreduce = AllreduceAlgorithm::kAuto;
  MpiWait wait = MpiWait::kBusy;  // comm.mpi_wait
  // Note [Control settings until the config agrees] (communicator.h): run with kMpi and
  // kBusy until settle_options() is called; its settings then replace these two.
  bool settle_later = false;
};

// argc/argv are passed to MPI_Init_thread when this call initialises MPI (may be null).
// Fails (Status) when sparq was built without MPI or the library offers less than
// MPI_THREAD_SERIALIZED.
Result<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc = nullptr,
                                                            char*** argv = nullptr,
                                                            MpiOptions options = {});

// Whether MPI is initialised and not yet finalised in this process (by sparq or by the
// program); false in a build without MPI.
bool mpi_in_use();

}  // namespace sparq::comm
