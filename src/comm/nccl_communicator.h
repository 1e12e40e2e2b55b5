// The NCCL backend: collectives on DEVICE buffers, one CUDA device per rank.
//
// Initialisation: make_nccl_communicator() takes any already-working communicator (normally
// the MPI one) as a bootstrap: it finds each rank's local rank on its host by gathering host
// names, selects that CUDA device (or NcclOptions::device), creates the ncclUniqueId on rank 0,
// broadcasts it over the bootstrap communicator and initialises a NON-BLOCKING NCCL
// communicator. Non-blocking matters: every NCCL call and every wait polls
// ncclCommGetAsyncError, so an asynchronous NCCL error or a peer that never joins is caught
// and the communicator aborted (ncclCommAbort) after NcclOptions::timeout_s instead of
// hanging the GPU forever; the job then ends through SPARQ_FATAL/MPI_Abort naming the call.
//
// Streams: all work goes to the communicator's own non-blocking stream(). By default each call
// is synchronous like every Communicator (it returns when the stream has finished it). With
// set_synchronous(false) calls only enqueue and return, for the stream-ordered engine (a FIFO
// of tasks on stream() gated by events; StreamCommEngine in stream_engine.h): results are
// then valid once an event recorded after them has completed (wait_event).
//
// Semantics: f16 and bf16 are reduced natively by NCCL (ncclFloat16 / ncclBfloat16); kAvg uses
// ncclAvg; u16 can be moved but not reduced (NCCL has no 16-bit integer type). Uneven
// reduce_scatter and allgatherv are grouped ncclReduce / ncclBroadcast calls; alltoall(v) is
// grouped ncclSend/ncclRecv. send/recv ignore the tag: NCCL matches messages between a pair
// of ranks in issue order. In-place forms are those of mpi_communicator.h; other overlaps are
// staged through a device copy. Bytes are counted with the ring model (byte_model.h).
//
// Emulated slow link (NcclOptions::emulate, comm/emulated_link.h): after each call a delay
// kernel holds stream() for the time the link would take to move the call's bytes, so
// whatever the stream engine queues behind the call starts that much later while the compute
// stream runs on. The delay follows NCCL's own time rather than overlapping it (the host link
// sleeps until the larger of the two): on one GPU NCCL's time is near zero. With
// emulate.ranks (one rank only) bytes are counted and priced as in that larger world.
//
// Threading: one thread at a time per communicator. Ownership: owns the NCCL communicator and
// its stream (move-only RAII); destroy it before the bootstrap communicator that finalises MPI.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/emulated_link.h"
#include "core/buffer.h"
#include "core/cuda/cuda_handles.h"
#include "core/status.h"

namespace sparq::comm {

struct NcclOptions {
  int device = -1;           // CUDA device of this rank; -1: its local rank on the host
  double timeout_s = 300.0;  // bound on every NCCL call and wait before aborting
  EmulatedLink emulate;      // disabled by default; see the header comment
};

// Owns an ncclComm_t: finalises and destroys it, or aborts it when it is broken.
class NcclCommHandle {
 public:
  NcclCommHandle() = default;
  explicit NcclCommHandle(ncclComm_t comm) : comm_(comm) {}
  ~NcclCommHandle();
  NcclCommHandle(NcclCommHandle&& other) noexcept;
  NcclCommHandle& operator=(NcclCommHandle&& other) noexcept;
  NcclCommHandle(const NcclCommHandle&) = delete;
  NcclCommHandle& operator=(const NcclCommHandle&) = delete;

  ncclComm_t get() const { return comm_; }
  void abort();  // ncclCommAbort; the handle is empty afterwards

 private:
  void release();
  ncclComm_t comm_ = nullptr;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(NcclCommHandle comm, cuda::Stream stream, int rank, int size, int device,
                   double timeout_s, EmulatedLink emulate = {});

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::kCUDA; }
  std::string backend() const override {
    return emulate_.enabled() ? "nccl+emulated-link" : "nccl";
  }
  void* device_stream() const override { return stream_.get(); }
  void drain(const std::string& what) override;

  void allreduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op) override;
  void allgather(const void* in, void* out, std::size_t count, DType dtype) override;
  void allgatherv(const void* in, void* out, std::span<const std::size_t> counts,
                  std::span<const std::size_t> displs, DType dtype) override;
  void reduce_scatter(const void* in, void* out, std::span<const std::size_t> counts, DType dtype,
                      ReduceOp op) override;
  void alltoall(const void* in, void* out, std::size_t count, DType dtype) override;
  void alltoallv(const void* in, std::span<const std::size_t> send_counts,
                 std::span<const std::size_t> send_displs, void* out,
                 std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                 DType dtype) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override;
  void barrier() override;
  void send(const void* buffer, std::size_t count, DType dtype, int peer, int tag) override;
  void recv(void* buffer, std::size_t count, DType dtype, int peer, int tag) override;

  cudaStream_t stream() const { return stream_.get(); }
  int cuda_device() const { return device_; }
  double timeout_s() const { return timeout_s_; }
  void set_synchronous(bool on) { synchronous_ = on; }
  bool synchronous() const { return synchronous_; }

  // Blocks until `event` (recorded on any stream) has completed, polling NCCL's asynchronous
  // error state; on an error or after timeout_s, aborts the communicator and ends the job
  // with a message naming `what`.
  void wait_event(cudaEvent_t event, const std::string& what, double timeout_s);
  // Polls until the last non-blocking NCCL call on this communicator has left
  // ncclInProgress (bounded like wait_event).
  void settle(const char* what);

 private:
  // After enqueueing `op`: settle the non-blocking call, then wait for the stream when
  // synchronous, and count the bytes.
  // With an emulated link, the delay for the call's bytes goes on the stream first.
  void finish(const char* op, WireBytes wire);
  // The per-rank counts a call is priced with: its own, or in an emulated world of
  // priced_size_ ranks (emulate.ranks) this rank's count for every rank.
  std::vector<std::size_t> priced_counts(std::span<const std::size_t> counts) const;
  [[noreturn]] void fail(const std::string& message);
  // A device copy of `bytes` of `in` on stream(), when input and output overlap.
  const void* stage(const void* in, std::size_t bytes);

  NcclCommHandle comm_;
  cuda::Stream stream_;
  cuda::Event done_;
  int rank_;
  int size_;
  int device_;
  double timeout_s_;
  EmulatedLink emulate_;
  int priced_size_;  // the world the byte model prices calls in: size_, or emulate.ranks
  bool synchronous_ = true;
  Buffer staging_;  // device scratch, reused: staged inputs and the barrier's word
};

// Fails (Status) without a visible CUDA device, when a host runs more ranks than it has
// devices, when the bootstrap is not a host communicator, or when options.emulate.ranks is
// set for a world of several ranks, and when NCCL's own start fails or times out on any rank
// (ncclGetUniqueId, ncclCommInitRankConfig: every rank fails, a failing rank with NCCL's
// reason, the others saying how many ranks failed; the trainer agrees the texts into one
// report). Collective over `bootstrap`.
Result<std::unique_ptr<NcclCommunicator>> make_nccl_communicator(Communicator& bootstrap,
                                                                 NcclOptions options = {});

}  // namespace sparq::comm
