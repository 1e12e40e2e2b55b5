// EmulatedLinkCommunicator: a decorator that makes a fast link (shared memory, a data-centre
// fabric) behave like a slow one, so that the effects sparq exists for (communication that
// dominates a step, compression that shrinks it, overlap that hides it) can be measured on
// one machine. After each call of the wrapped communicator it sleeps until
//     latency + max(bytes sent, bytes received) / bandwidth
// has passed since the call began (the byte model of the wrapped backend decides the bytes,
// so a ring allreduce of n floats costs about 2(P-1)/P * 4n / bandwidth). Sleeping blocks
// only the calling thread, the CommEngine's, so compute keeps running meanwhile, as it
// would beside a real NIC.
//
// Ranks that arrive apart: the time counts from each rank's own call, and a rank that arrives
// early waits for its peers inside the wrapped call, so that wait counts as link time. The
// last rank to arrive is charged in full (its call ends a whole link time after it began, as
// on a real link, where the transfer starts when the last rank joins); an early rank may
// leave up to one link time before that. The pace of a job, set by its last rank, is
// therefore priced right, while an early rank's exposed communication can read low by up to
// one link time per call (review, 2026-12-06; the GPU flavour below charges after the call,
// so it does not have this property). Counting from the wrapped call's return instead would
// add the fast link's own time to every call, and change every measurement docs/comm.md
// reports.
//
// Ownership: owns the wrapped communicator. Thread-compatible like every Communicator.
//
// The GPU flavour is NcclOptions::emulate (nccl_communicator.h): the same time, spent by a
// delay kernel on the communicator's stream after each call (core/cuda/stream_delay.h), so
// the buckets' stream is held while backward keeps running on the compute stream. There, and
// only there, `ranks` lets one GPU stand in for a cluster: see below.
#pragma once

#include <memory>

#include "comm/byte_model.h"
#include "comm/communicator.h"

namespace sparq::comm {

struct EmulatedLink {
  double gbit_per_s = 0;   // 0: no bandwidth limit
  double latency_us = 0;   // per call
  // 0: price each call by the real world's bytes. N > 1 (a ONE-rank NCCL communicator only):
  // price each call, bytes counted and time spent, as rank 0's share of the same call in a
  // world of N ranks, each contributing what this rank does, so one GPU measures how a
  // cluster's link would delay its buckets (the messages themselves stay one rank's).
  int ranks = 0;
  bool enabled() const { return gbit_per_s > 0 || latency_us > 0; }
  // What one call moving `bytes` costs: latency + max(sent, received) * 8 / bandwidth.
  double call_us(WireBytes bytes) const;
};

// The host flavour. Precondition: link.ranks == 0 (a host world is priced as it is).
std::unique_ptr<Communicator> make_emulated_link(std::unique_ptr<Communicator> inner,
                                                 EmulatedLink link);

}  // namespace sparq::comm
