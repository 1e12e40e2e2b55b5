// The trainer's bucket queue on GPUs (train.device: cuda with several ranks): a CommQueue
// whose tasks run on an NCCL communicator, in a StreamCommEngine (stream_engine.h) gated on
// the rank's compute stream, so each bucket's collective starts once the backward kernels
// enqueued before its submit have run, and overlaps the backward kernels enqueued after.
// Control traffic (agreement, evaluation sums, the trace gather) stays on the host
// communicator that bootstraps this one.
//
// This header is CUDA- and NCCL-free so that the trainer includes it in every build; without
// NCCL and MPI make_nccl_queue() is an error saying so.
#pragma once

#include <memory>

#include "comm/comm_queue.h"
#include "comm/communicator.h"
#include "core/exec_context.h"
#include "core/status.h"
#include "core/trace.h"

namespace sparq::comm {

struct NcclQueueOptions {
  double timeout_s = 300.0;        // bound on NCCL calls and on every wait
  TraceRecorder* trace = nullptr;  // each bucket becomes a kCommunication span
};

// Collective over `bootstrap` (a host communicator, normally MPI): creates the NCCL
// communicator on `context`'s device (each rank's own; make_nccl_communicator) and a stream
// engine on it whose producer is `context`'s compute stream. The queue owns both; `context`
// must outlive it. Errors: sparq built without NCCL or MPI, a CPU context, a rank without a
// device (named by make_nccl_communicator).
Result<std::unique_ptr<CommQueue>> make_nccl_queue(Communicator& bootstrap,
                                                   const ExecContext& context,
                                                   NcclQueueOptions options = {});

}  // namespace sparq::comm
