#include "comm/emulated_link.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/check.h"

namespace sparq::comm {
namespace {

class EmulatedLinkCommunicator final : public Communicator {
 public:
  EmulatedLinkCommunicator(std::unique_ptr<Communicator> inner, EmulatedLink link)
      : inner_(std::move(inner)), link_(link) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Device device() const override { return inner_->device(); }
  std::string backend() const override { return inner_->backend() + "+emulated-link"; }
  void settle_options(const CollectiveSettings& settings) override {
    inner_->settle_options(settings);
  }
  const EmulatedLink* emulated_link() const override { return &link_; }

  void allreduce(const void* in, void* out, std::size_t count, DType dtype,
                 ReduceOp op) override {
    timed([&] { inner_->allreduce(in, out, count, dtype, op); });
  }
  void allgather(const void* in, void* out, std::size_t count, DType dtype) override {
    timed([&] { inner_->allgather(in, out, count, dtype); });
  }
  void allgatherv(const void* in, void* out, std::span<const std::size_t> counts,
                  std::span<const std::size_t> displs, DType dtype) override {
    timed([&] { inner_->allgatherv(in, out, counts, displs, dtype); });
  }
  void reduce_scatter(const void* in, void* out, std::span<const std::size_t> counts,
                      DType dtype, ReduceOp op) override {
    timed([&] { inner_->reduce_scatter(in, out, counts, dtype, op); });
  }
  void alltoall(const void* in, void* out, std::size_t count, DType dtype) override {
    timed([&] { inner_->alltoall(in, out, count, dtype); });
  }
  void alltoallv(const void* in, std::span<const std::size_t> send_counts,
                 std::span<const std::size_t> send_displs, void* out,
                 std::span<const std::size_t> recv_counts,
                 std::span<const std::size_t> recv_displs, DType dtype) override {
    timed([&] {
      inner_->alltoallv(in, send_counts, send_displs, out, recv_counts, recv_displs, dtype);
    });
  }
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override {
    timed([&] { inner_->broadcast(buffer, count, dtype, root); });
  }
  void barrier() override {
    timed([&] { inner_->barrier(); });
  }
  void send(const void* buffer, std::size_t count, DType dtype, int peer, int tag) override {
    timed([&] { inner_->send(buffer, count, dtype, peer, tag); });
  }
  void recv(void* buffer, std::size_t count, DType dtype, int peer, int tag) override {
    timed([&] { inner_->recv(buffer, count, dtype, peer, tag); });
  }

 private:
  template <typename Call>
  void timed(Call&& call) {
    const auto begin = std::chrono::steady_clock::now();
    const ByteCounters before = inner_->bytes();
    call();
    const ByteCounters after = inner_->bytes();
    const std::uint64_t sent = after.sent - before.sent;
    const std::uint64_t received = after.received - before.received;
    count(sent, received);
    const double seconds = link_.call_us({sent, received}) * 1e-6;
    std::this_thread::sleep_until(begin + std::chrono::duration<double>(seconds));
  }

  std::unique_ptr<Communicator> inner_;
  EmulatedLink link_;
};

}  // namespace

double EmulatedLink::call_us(WireBytes bytes) const {
  double us = latency_us;
  if (gbit_per_s > 0) {
    us += 8.0 * static_cast<double>(std::max(bytes.sent, bytes.received)) / (gbit_per_s * 1e3);
  }
  return us;
}

std::unique_ptr<Communicator> make_emulated_link(std::unique_ptr<Communicator> inner,
                                                 EmulatedLink link) {
  SPARQ_CHECK(link.ranks == 0,
              "make_emulated_link: a host link is priced by its own world; ranks = {} is for a "
              "one-rank NCCL communicator (NcclOptions::emulate)",
              link.ranks);
  return std::make_unique<EmulatedLinkCommunicator>(std::move(inner), link);
}

}  // namespace sparq::comm
