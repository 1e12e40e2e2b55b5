// How the MPI backend waits for its transfers (comm.mpi_wait). See Note [Waiting for MPI].
//
// Note [Waiting for MPI]
// Open MPI's blocking calls and MPI_Wait poll the network in a loop until the transfer ends
// (mpi_yield_when_idle only adds sched_yield to the loop). sparq's communication thread spends
// most of a step waiting, next to the compute thread(s) that want every core: on the emulated
// cluster (4 ranks on 2 cores, gpt2-tiny, lbs, 100 Mbit/s) each rank's communication thread
// used 1.2-2.0 s of CPU in a 13 s run, against 4.7-5.1 s for its compute thread, while the
// work it had to do (encode, decode) takes about a tenth of that. kSleep starts every
// transfer as a non-blocking call and tests it with growing pauses in between
// (kFirstPause doubling up to kLongestPause), so a waiting thread gives its core back; a
// transfer that completes during a pause is noticed up to kLongestPause late, and the
// network moves data during the pauses only as far as the kernel's socket buffers reach
// (MPI progresses a transfer only inside its own calls). kBusy calls MPI's blocking
// collectives, the library's own algorithms, as before; point-to-point transfers are
// MPI_Isend/MPI_Irecv completed by MPI_Wait in both modes (for kBusy the same as MPI_Send and
// MPI_Recv). docs/comm.md has the measurements.
#pragma once

#include <mpi.h>

#include <chrono>
#include <span>

#include "comm/mpi_communicator.h"  // MpiWait

namespace sparq::comm {

inline constexpr std::chrono::microseconds kFirstPause{10};
inline constexpr std::chrono::microseconds kLongestPause{200};

// Completes `request` as MPI_Wait does (status may be MPI_STATUS_IGNORE) and returns MPI's
// code; kSleep tests it with pauses in between (Note [Waiting for MPI]).
int wait_request(MPI_Request* request, MPI_Status* status, MpiWait mode);

// Completes every request (statuses ignored), as MPI_Waitall does.
int wait_all_requests(std::span<MPI_Request> requests, MpiWait mode);

// One collective, blocking or started and waited for by mode: `blocking()` calls the
// blocking form, `start(MPI_Request*)` the matching non-blocking one. Returns MPI's code.
template <typename Blocking, typename Start>
int run_collective(MpiWait mode, Blocking&& blocking, Start&& start) {
  if (mode == MpiWait::kBusy) return blocking();
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = start(&request);
  if (rc != MPI_SUCCESS) return rc;
  return wait_request(&request, MPI_STATUS_IGNORE, mode);
}

}  // namespace sparq::comm

// MPI_COLLECTIVE(mode, MPI_Allgather, MPI_Iallgather, args...): the collective that `args`
// describe, run by `mode` (an MpiWait) through run_collective; returns MPI's code.
#define MPI_COLLECTIVE(mode, blocking, nonblocking, ...) \
  ::sparq::comm::run_collective(                         \
      (mode), [&] { return blocking(__VA_ARGS__); },     \
      [&](MPI_Request* sparq_request_) { return nonblocking(__VA_ARGS__, sparq_request_); })
