// The trainer's bucket queue on GPUs (train.device: cuda, when built with NCCL): a CommQueue
// whose tasks run on an NCCL communicator, in a StreamCommEngine (stream_engine.h) gated on
// the rank's compute stream, so each bucket's collective starts once the backward kernels
// enqueued before its submit have run, and overlaps the backward kernels enqueued after.
// Control traffic (agreement, evaluation sums, the trace gather) stays on the host
// communicator that bootstraps this one.
//
// One rank needs no MPI: the bootstrap may be the self communicator, and a one-rank NCCL
// communicator then runs the buckets on its stream like any other (and can emulate a
// cluster's link, EmulatedLink::ranks).
//
// This header is CUDA- and NCCL-free so that the trainer includes it in every build; without
// NCCL make_nccl_queue() is an error saying so.
#pragma once

#include <memory>

#include "comm/comm_queue.h"
#include "comm/communicator.h"
#include "comm/emulated_link.h"
#include "core/exec_context.h"
#include "core/status.h"
#include "core/trace.h"

namespace sparq::comm {

struct NcclQueueOptions {
  double timeout_s = 300.0;        // bound on NCCL calls and on every wait
  TraceRecorder* trace = nullptr;  // each bucket becomes a kCommunication span
  EmulatedLink emulate;            // a slow link emulated on the NCCL stream (emulated_link.h)
};

// Collective over `bootstrap` (a host communicator, normally MPI): creates the NCCL
// communicator on `context`'s device (each rank's own; make_nccl_communicator) and a stream
// engine on it whose producer is `context`'s compute stream. The queue owns both; `context`
// must outlive it. Errors: sparq built without NCCL, a CPU context, a rank without a device,
// an emulated world (emulate.ranks) on several ranks (named by make_nccl_communicator).
// Whether make_nccl_queue can succeed in this build (sparq built with NCCL).
bool nccl_queue_built();

Result<std::unique_ptr<CommQueue>> make_nccl_queue(Communicator& bootstrap,
                                                   const ExecContext& context,
                                                   NcclQueueOptions options = {});

}  // namespace sparq::comm
