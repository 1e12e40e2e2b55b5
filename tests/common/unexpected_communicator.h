// A test double of a world of two, rank 0, on the host: every collective fails the test unless
// the subclass overrides it. Tests override the calls their code under test may make and see
// every other one reported.
#pragma once

#include <gtest/gtest.h>

#include <span>
#include <string>

#include "comm/communicator.h"

namespace sparq::testing {

class UnexpectedCommunicator : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Device device() const override { return Device::kCPU; }
  std::string backend() const override { return "test double"; }
  void allreduce(const void*, void*, std::size_t, DType, comm::ReduceOp) override {
    unexpected("allreduce");
  }
  void allgather(const void*, void*, std::size_t, DType) override { unexpected("allgather"); }
  void allgatherv(const void*, void*, std::span<const std::size_t>, std::span<const std::size_t>,
                  DType) override {
    unexpected("allgatherv");
  }
  void reduce_scatter(const void*, void*, std::span<const std::size_t>, DType,
                      comm::ReduceOp) override {
    unexpected("reduce_scatter");
  }
  void alltoall(const void*, void*, std::size_t, DType) override { unexpected("alltoall"); }
  void alltoallv(const void*, std::span<const std::size_t>, std::span<const std::size_t>, void*,
                 std::span<const std::size_t>, std::span<const std::size_t>, DType) override {
    unexpected("alltoallv");
  }
  void broadcast(void*, std::size_t, DType, int) override { unexpected("broadcast"); }
  void barrier() override { unexpected("barrier"); }
  void send(const void*, std::size_t, DType, int, int) override { unexpected("send"); }
  void recv(void*, std::size_t, DType, int, int) override { unexpected("recv"); }

 protected:
  static void unexpected(const char* call) { ADD_FAILURE() << "an unexpected " << call; }
};

}  // namespace sparq::testing
