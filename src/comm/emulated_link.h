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
// Ownership: owns the wrapped communicator. Thread-compatible like every Communicator.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace sparq::comm {

struct EmulatedLink {
  double gbit_per_s = 0;   // 0: no bandwidth limit
  double latency_us = 0;   // per call
  bool enabled() const { return gbit_per_s > 0 || latency_us > 0; }
};

std::unique_ptr<Communicator> make_emulated_link(std::unique_ptr<Communicator> inner,
                                                 EmulatedLink link);

}  // namespace sparq::comm
