// The world-of-one backend: lets a single process run the full training path (engine,
// compressors, aggregation) without mpirun. Nothing goes on the wire, so byte counters only
// count calls.
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "comm/arg_checks.h"
#include "comm/byte_model.h"
#include "comm/communicator.h"
#include "core/check.h"

#ifdef SPARQ_HAS_CUDA
#include "core/cuda/sync_copy.h"
#endif

namespace sparq::comm {
namespace {

class SelfCommunicator final : public Communicator {
 public:
  explicit SelfCommunicator(Device device) : device_(device) {
#ifndef SPARQ_HAS_CUDA
    SPARQ_CHECK(device == Device::kCPU,
                "self communicator on {} requested, but sparq was built without CUDA",
                device_name(device));
#endif
  }

  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return device_; }
  std::string backend() const override { return "self"; }

  void allreduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op) override {
    check_reduce("allreduce", dtype, op);
    // The sum and the mean over one rank are both the input itself.
    copy("allreduce", out, in, count * dtype_size(dtype));
  }

  void allgather(const void* in, void* out, std::size_t count, DType dtype) override {
    copy("allgather", out, in, count * dtype_size(dtype));
  }

  void allgatherv(const void* in, void* out, std::span<const std::size_t> counts,
                  std::span<const std::size_t> displs, DType dtype) override {
    check_per_rank("allgatherv", "counts", counts, 1);
    if (!displs.empty()) check_per_rank("allgatherv", "displs", displs, 1);
    const std::size_t es = dtype_size(dtype);
    const std::size_t offset = displs.empty() ? 0 : displs[0] * es;
    copy("allgatherv", static_cast<char*>(out) + offset, in, counts[0] * es);
  }

  void reduce_scatter(const void* in, void* out, std::span<const std::size_t> counts, DType dtype,
                      ReduceOp op) override {
    check_per_rank("reduce_scatter", "counts", counts, 1);
    check_reduce("reduce_scatter", dtype, op);
    copy("reduce_scatter", out, in, counts[0] * dtype_size(dtype));
  }

  void alltoall(const void* in, void* out, std::size_t count, DType dtype) override {
    copy("alltoall", out, in, count * dtype_size(dtype));
  }

  void alltoallv(const void* in, std::span<const std::size_t> send_counts,
                 std::span<const std::size_t> send_displs, void* out,
                 std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                 DType dtype) override {
    check_per_rank("alltoallv", "send_counts", send_counts, 1);
    check_per_rank("alltoallv", "recv_counts", recv_counts, 1);
    SPARQ_CHECK(send_counts[0] == recv_counts[0],
                "alltoallv: rank 0 sends {} elements to itself but expects {}", send_counts[0],
                recv_counts[0]);
    const std::size_t es = dtype_size(dtype);
    const std::size_t src = send_displs.empty() ? 0 : send_displs[0] * es;
    const std::size_t dst = recv_displs.empty() ? 0 : recv_displs[0] * es;
    copy("alltoallv", static_cast<char*>(out) + dst, static_cast<const char*>(in) + src,
         send_counts[0] * es);
  }

  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override {
    check_rank_arg("broadcast", "root", root, 1);
    check_buffer("broadcast", "buffer", buffer, count * dtype_size(dtype));
    count_call();
  }

  void barrier() override { count_call(); }

  // Sending to oneself is buffered (as an eager MPI send would be) so that a tree algorithm
  // written for P ranks also runs with P == 1.
  void send(const void* buffer, std::size_t count, DType dtype, int peer, int tag) override {
    check_rank_arg("send", "peer", peer, 1);
    check_tag("send", tag);
    const std::size_t bytes = count * dtype_size(dtype);
    check_buffer("send", "buffer", buffer, bytes);
    std::vector<char> message(bytes);
    copy_raw(message.data(), buffer, bytes);
    mailbox_[tag].push_back(std::move(message));
    count_call();
  }

  void recv(void* buffer, std::size_t count, DType dtype, int peer, int tag) override {
    check_rank_arg("recv", "peer", peer, 1);
    check_tag("recv", tag);
    auto it = mailbox_.find(tag);
    SPARQ_CHECK(it != mailbox_.end() && !it->second.empty(),
                "recv: no message with tag {} was sent to self; this receive would block forever",
                tag);
    std::vector<char> message = std::move(it->second.front());
    it->second.pop_front();
    const std::size_t bytes = count * dtype_size(dtype);
    check_buffer("recv", "buffer", buffer, bytes);
    SPARQ_CHECK(message.size() == bytes, "recv: message with tag {} has {} bytes, expected {}", tag,
                message.size(), bytes);
    copy_raw(buffer, message.data(), bytes);
    count_call();
  }

 private:
  void count_call() { count(0, 0); }

  void copy(const char* op, void* out, const void* in, std::size_t bytes) {
    check_buffer(op, "input", in, bytes);
    check_buffer(op, "output", out, bytes);
    if (in != out) copy_raw(out, in, bytes);
    count_call();
  }

  // Copies within this communicator's device or between it and the host mailbox
  // (cudaMemcpyDefault infers the direction from unified addressing).
  void copy_raw(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    if (device_ == Device::kCPU) {
      std::memmove(dst, src, bytes);
      return;
    }
#ifdef SPARQ_HAS_CUDA
    // The caller's streams are non-blocking: Note [Synchronous copies and non-blocking streams].
    cuda::copy_synchronously(dst, src, bytes);
#endif
  }

  Device device_;
  std::map<int, std::deque<std::vector<char>>> mailbox_;
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator(Device device) {
  return std::make_unique<SelfCommunicator>(device);
}

}  // namespace sparq::comm
