#include "comm/mpi_communicator.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "comm/arg_checks.h"
#include "comm/byte_model.h"
#include "comm/mpi_check.h"
#include "comm/mpi_ring.h"
#include "comm/mpi_support.h"
#include "comm/mpi_types.h"
#include "comm/mpi_wait.h"
#include "comm/ring_threshold.h"
#include "core/check.h"
#include "core/fault.h"

namespace sparq::comm {
namespace {

using mpi_support::for_each_chunk;
using mpi_support::overlaps;
using mpi_support::OwnedComm;
using mpi_support::to_int;
using mpi_support::to_ints;

// The MPI thread level is a property of the process, so the lock that serialises calls below
// MPI_THREAD_MULTIPLE must be process-wide as well, shared by every MpiCommunicator.
std::mutex& serial_mutex() {
  static std::mutex m;
  return m;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm parent, int thread_level, MpiOptions options)
      : comm_(parent),
        ring_comm_(parent),
        options_(options),
        settled_(!options.settle_later),
        thread_level_(thread_level) {
    MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
    MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::kCPU; }
  std::string backend() const override { return "mpi"; }
  void settle_options(const CollectiveSettings& settings) override {
    // The config was validated: an unknown name keeps the setting made with.
    options_.allreduce =
        allreduce_algorithm_from_name(settings.allreduce).value_or(options_.allreduce);
    options_.wait = mpi_wait_from_name(settings.mpi_wait).value_or(options_.wait);
    settled_.store(true, std::memory_order_release);
  }

  void allreduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op) override {
    check_reduce("allreduce", dtype, op);
    const std::size_t es = dtype_size(dtype), bytes = count * es;
    check_buffer("allreduce", "input", in, bytes);
    check_buffer("allreduce", "output", out, bytes);
    if (use_ring(bytes)) {
      {
        auto guard = lock();
        ring_allreduce_sum(ring_comm_.get(), rank_, size_, in, out, count, dtype, ring_scratch_,
                           active().wait);
      }
      if (op == ReduceOp::kAvg) divide_host(out, count, dtype, size_);
      record(ring_allreduce_bytes(count, es, rank_, size_));
      return;
    }
    std::vector<char> staged;
    const bool in_place = in == out;
    if (!in_place && overlaps(in, bytes, out, bytes)) in = stage(staged, in, bytes);
    {
      auto guard = lock();
      for_each_chunk(count, [&](std::size_t done, int n) {
        MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Allreduce, MPI_Iallreduce,
                                 in_place ? MPI_IN_PLACE : static_cast<const char*>(in) + done * es,
                                 static_cast<char*>(out) + done * es, n, mpi_datatype(dtype),
                                 ops_.sum(dtype), comm_.get()));
      });
    }
    if (op == ReduceOp::kAvg) divide_host(out, count, dtype, size_);
    record(ring_allreduce_bytes(count, es, rank_, size_));
  }

  void allgather(const void* in, void* out, std::size_t count, DType dtype) override {
    const std::size_t es = dtype_size(dtype), bytes = count * es;
    const int n = to_int(count, "allgather", "count");
    check_buffer("allgather", "input", in, bytes);
    check_buffer("allgather", "output", out, bytes * size_);
    std::vector<char> staged;
    const bool in_place = in == static_cast<const char*>(out) + rank_ * bytes;
    if (!in_place && overlaps(in, bytes, out, bytes * size_)) in = stage(staged, in, bytes);
    {
      auto guard = lock();
      MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Allgather, MPI_Iallgather,
                               in_place ? MPI_IN_PLACE : in, n, mpi_datatype(dtype), out, n,
                               mpi_datatype(dtype), comm_.get()));
    }
    const std::vector<std::size_t> counts(size_, count);
    record(ring_allgatherv_bytes(counts, es, rank_));
  }

  void allgatherv(const void* in, void* out, std::span<const std::size_t> counts,
                  std::span<const std::size_t> displs, DType dtype) override {
    check_per_rank("allgatherv", "counts", counts, size_);
    std::vector<std::size_t> packed;
    if (displs.empty()) {
      packed = packed_displs(counts);
      displs = packed;
    }
    check_per_rank("allgatherv", "displs", displs, size_);
    const std::size_t es = dtype_size(dtype), bytes = counts[rank_] * es;
    const std::size_t out_bytes = extent(counts, displs) * es;
    check_buffer("allgatherv", "input", in, bytes);
    check_buffer("allgatherv", "output", out, out_bytes);
    const std::vector<int> icounts = to_ints(counts, "allgatherv", "counts[r]");
    // Offsets it computed are not the caller's displs (review, 2026-12-06).
    const std::vector<int> idispls = to_ints(
        displs, "allgatherv", packed.empty() ? "displs[r]" : "the packed offset of rank r's block");
    std::vector<char> staged;
    const bool in_place = in == static_cast<const char*>(out) + displs[rank_] * es;
    if (!in_place && overlaps(in, bytes, out, out_bytes)) in = stage(staged, in, bytes);
    {
      auto guard = lock();
      MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Allgatherv, MPI_Iallgatherv,
                               in_place ? MPI_IN_PLACE : in, icounts[rank_], mpi_datatype(dtype),
                               out, icounts.data(), idispls.data(), mpi_datatype(dtype),
                               comm_.get()));
    }
    record(ring_allgatherv_bytes(counts, es, rank_));
  }

  void reduce_scatter(const void* in, void* out, std::span<const std::size_t> counts, DType dtype,
                      ReduceOp op) override {
    check_per_rank("reduce_scatter", "counts", counts, size_);
    check_reduce("reduce_scatter", dtype, op);
    const std::size_t es = dtype_size(dtype);
    const std::size_t in_bytes = total_count(counts) * es, out_bytes = counts[rank_] * es;
    check_buffer("reduce_scatter", "input", in, in_bytes);
    check_buffer("reduce_scatter", "output", out, out_bytes);
    to_int(total_count(counts), "reduce_scatter", "sum(counts)");
    const std::vector<int> icounts = to_ints(counts, "reduce_scatter", "counts[r]");
    const std::size_t own_offset = packed_displs(counts)[rank_] * es;
    const bool in_place = out == static_cast<const char*>(in) + own_offset;
    std::vector<char> staged;
    if (!in_place && overlaps(in, in_bytes, out, out_bytes)) in = stage(staged, in, in_bytes);
    {
      auto guard = lock();
      if (in_place) {
        // MPI's in-place form leaves the result at the start of the buffer.
        MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Reduce_scatter, MPI_Ireduce_scatter,
                                 MPI_IN_PLACE, const_cast<void*>(in), icounts.data(),
                                 mpi_datatype(dtype), ops_.sum(dtype), comm_.get()));
      } else {
        MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Reduce_scatter, MPI_Ireduce_scatter, in, out,
                                 icounts.data(), mpi_datatype(dtype), ops_.sum(dtype),
                                 comm_.get()));
      }
    }
    if (in_place && own_offset > 0 && out_bytes > 0) std::memmove(out, in, out_bytes);
    if (op == ReduceOp::kAvg) divide_host(out, counts[rank_], dtype, size_);
    record(ring_reduce_scatter_bytes(counts, es, rank_));
  }

  void alltoall(const void* in, void* out, std::size_t count, DType dtype) override {
    const std::size_t es = dtype_size(dtype), bytes = count * es * size_;
    const int n = to_int(count, "alltoall", "count");
    to_int(count * size_, "alltoall", "size() * count");
    check_buffer("alltoall", "input", in, bytes);
    check_buffer("alltoall", "output", out, bytes);
    std::vector<char> staged;
    const bool in_place = in == out;
    if (!in_place && overlaps(in, bytes, out, bytes)) in = stage(staged, in, bytes);
    {
      auto guard = lock();
      MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Alltoall, MPI_Ialltoall,
                               in_place ? MPI_IN_PLACE : in, n, mpi_datatype(dtype), out, n,
                               mpi_datatype(dtype), comm_.get()));
    }
    const std::vector<std::size_t> counts(size_, count);
    record(alltoallv_bytes(counts, counts, es, rank_));
  }

  void alltoallv(const void* in, std::span<const std::size_t> send_counts,
                 std::span<const std::size_t> send_displs, void* out,
                 std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                 DType dtype) override {
    check_per_rank("alltoallv", "send_counts", send_counts, size_);
    check_per_rank("alltoallv", "recv_counts", recv_counts, size_);
    std::vector<std::size_t> packed_send, packed_recv;
    if (send_displs.empty()) send_displs = packed_send = packed_displs(send_counts);
    if (recv_displs.empty()) recv_displs = packed_recv = packed_displs(recv_counts);
    check_per_rank("alltoallv", "send_displs", send_displs, size_);
    check_per_rank("alltoallv", "recv_displs", recv_displs, size_);
    const std::size_t es = dtype_size(dtype);
    const std::size_t in_bytes = extent(send_counts, send_displs) * es;
    const std::size_t out_bytes = extent(recv_counts, recv_displs) * es;
    check_buffer("alltoallv", "input", in, in_bytes);
    check_buffer("alltoallv", "output", out, out_bytes);
    const auto sc = to_ints(send_counts, "alltoallv", "send_counts[r]");
    const auto sd =
        to_ints(send_displs, "alltoallv",
                packed_send.empty() ? "send_displs[r]" : "the packed offset of block r");
    const auto rc = to_ints(recv_counts, "alltoallv", "recv_counts[r]");
    const auto rd =
        to_ints(recv_displs, "alltoallv",
                packed_recv.empty() ? "recv_displs[r]" : "the packed offset of block r");
    // Never MPI_IN_PLACE: MPI's in-place alltoallv sends from the receive layout, so it would
    // apply only on the ranks whose two layouts coincide, and MPI_IN_PLACE must be passed by
    // every rank or by none: ranks that did and ranks that did not hung the job at 3 ranks
    // (review, 2026-12-08). An input that overlaps the output is copied aside instead.
    std::vector<char> staged;
    if (overlaps(in, in_bytes, out, out_bytes)) in = stage(staged, in, in_bytes);
    {
      auto guard = lock();
      MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Alltoallv, MPI_Ialltoallv, in, sc.data(),
                               sd.data(), mpi_datatype(dtype), out, rc.data(), rd.data(),
                               mpi_datatype(dtype), comm_.get()));
    }
    record(alltoallv_bytes(send_counts, recv_counts, es, rank_));
  }

  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override {
    check_rank_arg("broadcast", "root", root, size_);
    const std::size_t es = dtype_size(dtype);
    check_buffer("broadcast", "buffer", buffer, count * es);
    {
      auto guard = lock();
      for_each_chunk(count, [&](std::size_t done, int n) {
        MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Bcast, MPI_Ibcast,
                                 static_cast<char*>(buffer) + done * es, n, mpi_datatype(dtype),
                                 root, comm_.get()));
      });
    }
    record(chain_broadcast_bytes(count, es, rank_, root, size_));
  }

  void barrier() override {
    {
      auto guard = lock();
      MPI_CHECK(MPI_COLLECTIVE(active().wait, MPI_Barrier, MPI_Ibarrier, comm_.get()));
    }
    record({});
  }

  void send(const void* buffer, std::size_t count, DType dtype, int peer, int tag) override {
    check_rank_arg("send", "peer", peer, size_);
    check_tag("send", tag);
    const std::size_t es = dtype_size(dtype);
    check_buffer("send", "buffer", buffer, count * es);
    {
      auto guard = lock();
      for_each_chunk(count, [&](std::size_t done, int n) {
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_CHECK(MPI_Isend(static_cast<const char*>(buffer) + done * es, n, mpi_datatype(dtype),
                            peer, tag, comm_.get(), &request));
        MPI_CHECK(wait_request(&request, MPI_STATUS_IGNORE, active().wait));
      });
    }
    record({count * es, 0});
  }

  void recv(void* buffer, std::size_t count, DType dtype, int peer, int tag) override {
    check_rank_arg("recv", "peer", peer, size_);
    check_tag("recv", tag);
    const std::size_t es = dtype_size(dtype);
    check_buffer("recv", "buffer", buffer, count * es);
    {
      auto guard = lock();
      for_each_chunk(count, [&](std::size_t done, int n) {
        MPI_Status status;
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_CHECK(MPI_Irecv(static_cast<char*>(buffer) + done * es, n, mpi_datatype(dtype), peer,
                            tag, comm_.get(), &request));
        MPI_CHECK(wait_request(&request, &status, active().wait));
        int got = 0;
        MPI_CHECK(MPI_Get_count(&status, mpi_datatype(dtype), &got));
        SPARQ_CHECK(got == n, "recv: message from rank {} with tag {} has {} elements, expected {}",
                    peer, tag, got, n);
      });
    }
    record({0, count * es});
  }

 private:
  // Taken right before every MPI call (collectives, send, recv), which makes it the place of
  // the "comm.collective" fault point (hit=N: the N-th MPI operation of this process), so a
  // reliability trial can end a rank between two phases of a compressed exchange, after its
  // size allgather and before its payload.
  std::unique_lock<std::mutex> lock() const {
    fault::point("comm.collective");
    if (thread_level_ >= MPI_THREAD_MULTIPLE) return {};
    return std::unique_lock<std::mutex>(serial_mutex());
  }

  void record(WireBytes bytes) { count(bytes.sent, bytes.received); }

  // The settings in force: the configured ones once settled, else the control ones.
  MpiOptions active() const {
    if (settled_.load(std::memory_order_acquire)) return options_;
    return {.allreduce = AllreduceAlgorithm::kMpi, .wait = MpiWait::kBusy};
  }

  // Whether allreduce of `bytes` runs sparq's ring. kAuto depends only on the size and the
  // world, the same on every rank, so all ranks take the same path.
  bool use_ring(std::size_t bytes) const {
    switch (active().allreduce) {
      case AllreduceAlgorithm::kMpi:
        return false;
      case AllreduceAlgorithm::kRing:
        return true;
      case AllreduceAlgorithm::kAuto:
        return size_ > 1 && bytes >= auto_ring_threshold_bytes(size_);
    }
    return false;
  }

  static const void* stage(std::vector<char>& storage, const void* in, std::size_t bytes) {
    storage.assign(static_cast<const char*>(in), static_cast<const char*>(in) + bytes);
    return storage.data();
  }

  OwnedComm comm_;
  OwnedComm ring_comm_;             // the ring's own tag space, apart from send()/recv()
  std::vector<char> ring_scratch_;  // the ring's staging buffers, kept between calls
  MpiSumOps ops_;
  MpiOptions options_;
  std::atomic<bool> settled_;
  int rank_ = 0;
  int size_ = 1;
  int thread_level_;
};

}  // namespace

namespace mpi_support {

std::unique_ptr<Communicator> new_mpi_communicator(MPI_Comm parent, int thread_level,
                                                   MpiOptions options) {
  return std::make_unique<MpiCommunicator>(parent, thread_level, options);
}

}  // namespace mpi_support
}  // namespace sparq::comm
