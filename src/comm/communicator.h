// Communicator: synchronous collectives on raw buffers, one implementation per backend:
//   MPI  (host buffers),  NCCL (device buffers, bootstrapped over MPI),  Self (world of one).
// Every call blocks until this rank's part is complete and adds the bytes this rank sent and
// received to the counters (see ByteCounters). Callers keep Note [Rank-identical collective
// order] below.
//
// Note [Rank-identical collective order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every rank must issue the same collectives, with matching sizes, in the same order. MPI and
// NCCL match calls by position alone: a rank that skips a call, or issues two in another
// order, hangs the job or silently combines the wrong buffers. sparq keeps this invariant
// by construction, never by timing:
//   - the WFBP scheduler submits buckets in the order they become complete, a function of the
//     sequence of readiness reports alone, which the same backward code makes identical on
//     every rank; never of timing (Note [Readiness launch order], wfbp_scheduler.h);
//   - an engine runs its tasks strictly FIFO on ONE thread (CommEngine) or ONE stream
//     (StreamCommEngine), and while an engine lives every collective, control traffic
//     included (agreement on errors, evaluation sums, the trace gather), goes through it;
//   - every routing decision (dense or compressed bucket, dense warm-up, aggregation
//     strategy, a skipped step) depends only on values that are identical on all ranks: the
//     config, the step, the bucket plan, aggregated results;
//   - a compressor or rank with nothing to send still takes part in the collective with an
//     empty message, and variable sizes travel in a collective of their own first.
// Code that adds a collective states how it keeps this note, citing it by name.
// Sizes are in ELEMENTS of `dtype` unless the name says bytes. In-place is allowed where
// noted by passing the same pointer as input and output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace sparq::comm {

enum class ReduceOp { kSum, kAvg };

// Element offsets of blocks packed in rank order, the exclusive prefix sum of the counts:
// {0, c0, c0 + c1, ...} (one entry per count). The layout of every `displs` argument below.
inline std::vector<std::size_t> packed_displs(std::span<const std::size_t> counts) {
  std::vector<std::size_t> displs(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), std::size_t{0});
  return displs;
}
inline std::size_t total_count(std::span<const std::size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

// Bytes this rank put on and took off the wire, by the algorithm's actual volume (for ring
// collectives: 2(P-1)/P * n for allreduce, (P-1)/P * n for allgather and reduce_scatter).
struct ByteCounters {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t calls = 0;
};

struct EmulatedLink;  // comm/emulated_link.h

// The collective settings of one training run, by the names its config gives them
// (comm.allreduce, comm.mpi_wait); backends without such choices ignore them.
struct CollectiveSettings {
  std::string allreduce = "auto";
  std::string mpi_wait = "busy";
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;     // where buffers passed to this communicator live
  virtual std::string backend() const = 0;  // "mpi", "nccl", "self"
  // The cudaStream_t its collectives run on, for work that must be ordered with them (a GPU
  // codec encoding the message a collective sends); nullptr for host communicators.
  virtual void* device_stream() const { return nullptr; }
  // Returns once every call enqueued on device_stream() has completed, bounded like the
  // backend's collectives: NCCL waits at most its timeout, then aborts the communicator and
  // ends the job naming `what`, where cudaStreamSynchronize would wait forever for a peer
  // that died mid-collective. Host backends finish every call before returning: a no-op.
  virtual void drain(const std::string& /*what*/) {}
  // Note [Control settings until the config agrees]: a communicator made for training
  // (train/run.h, make_communicator) runs its collectives with fixed settings (MPI's own
  // algorithms, blocking waits) until the ranks have agreed that their configs are the same;
  // ranks whose comm.allreduce or comm.mpi_wait differ, or one whose config did not load,
  // still meet in the agreement and refuse together instead of waiting for comm.timeout_s.
  // The trainer then calls this with its run's settings, which apply from then on: each run
  // its own, so one communicator made per process serves runs with different settings (the
  // settings it was made with are only the default of a run that never settles). Call it
  // between collectives, from the thread that submits them. Others: nothing to do.
  virtual void settle_options(const CollectiveSettings& /*settings*/) {}
  // The slow link this communicator emulates (comm/emulated_link.h), or null: fixed when it
  // is made, so a run whose comm.emulate differs is refused (train/trainer.cpp).
  virtual const EmulatedLink* emulated_link() const { return nullptr; }

  // in/out: count elements. in == out is in-place. f16/bf16 are reduced in f32 where the
  // backend cannot reduce them natively.
  virtual void allreduce(const void* in, void* out, std::size_t count, DType dtype,
                         ReduceOp op) = 0;
  // in: count elements; out: size() * count elements, rank r's block at r * count.
  virtual void allgather(const void* in, void* out, std::size_t count, DType dtype) = 0;
  // in: counts[rank()] elements; out: sum(counts), rank r's block at displs[r]
  // (displs empty means packed in rank order). Zero counts are allowed.
  virtual void allgatherv(const void* in, void* out, std::span<const std::size_t> counts,
                          std::span<const std::size_t> displs, DType dtype) = 0;
  // in: sum(counts) elements; out: counts[rank()] elements, the reduction of every rank's
  // block [offset_r, offset_r + counts[r]) where offsets are the prefix sums of counts.
  virtual void reduce_scatter(const void* in, void* out, std::span<const std::size_t> counts,
                              DType dtype, ReduceOp op) = 0;
  // in and out: size() * count elements; block j of `in` goes to rank j.
  virtual void alltoall(const void* in, void* out, std::size_t count, DType dtype) = 0;
  // Per-peer counts and displacements (elements) for sending and receiving.
  virtual void alltoallv(const void* in, std::span<const std::size_t> send_counts,
                         std::span<const std::size_t> send_displs, void* out,
                         std::span<const std::size_t> recv_counts,
                         std::span<const std::size_t> recv_displs, DType dtype) = 0;
  virtual void broadcast(void* buffer, std::size_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;
  virtual void send(const void* buffer, std::size_t count, DType dtype, int peer, int tag) = 0;
  virtual void recv(void* buffer, std::size_t count, DType dtype, int peer, int tag) = 0;

  const ByteCounters& bytes() const { return bytes_; }
  void reset_bytes() { bytes_ = {}; }
  // What the collectives since `before` (an earlier bytes()) moved: a control task's own
  // bytes, as the communicator counted them, not recomputed by its caller.
  ByteCounters bytes_since(const ByteCounters& before) const {
    return {bytes_.sent - before.sent, bytes_.received - before.received,
            bytes_.calls - before.calls};
  }

 protected:
  void count(std::uint64_t sent, std::uint64_t received) {
    bytes_.sent += sent;
    bytes_.received += received;
    bytes_.calls += 1;
  }

 private:
  ByteCounters bytes_;
};

// A world of one: every collective copies in to out (or does nothing in place).
std::unique_ptr<Communicator> make_self_communicator(Device device = Device::kCPU);

}  // namespace sparq::comm
