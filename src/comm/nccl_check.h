// NCCL_CHECK: a failing NCCL call ends the job (through the fatal handler, i.e. MPI_Abort)
// naming the call, NCCL's error string and its last error message. ncclInProgress is not a
// failure: sparq's NCCL communicators are non-blocking and settle such calls by polling
// (NcclCommunicator::settle) so that a stuck peer can be timed out and aborted.
#pragma once

#include <nccl.h>

namespace sparq::comm {

[[noreturn]] void nccl_call_failed(const char* call, ncclResult_t result, const char* file,
                                   int line);

}  // namespace sparq::comm

#define NCCL_CHECK(call)                                                          \
  do {                                                                            \
    const ncclResult_t sparq_nccl_rc_ = (call);                                   \
    if (sparq_nccl_rc_ != ncclSuccess && sparq_nccl_rc_ != ncclInProgress)        \
      ::sparq::comm::nccl_call_failed(#call, sparq_nccl_rc_, __FILE__, __LINE__); \
  } while (0)
