// The world-of-one backend: every collective is a copy, p2p to self is buffered, and bad
// arguments end the process with a message naming the call and the value.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "comm/communicator.h"
#include "comm_test_util.h"

namespace sparq::comm {
namespace {

using testing::decode;
using testing::encode;

TEST(SelfCommunicator, CollectivesCopyInputToOutput) {
  auto comm = make_self_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->backend(), "self");
  for (DType dtype : testing::kAllDTypes) {
    const std::size_t n = 37;
    const auto in = encode(dtype, testing::rank_values(0, n));
    std::vector<char> out(in.size());
    comm->allreduce(in.data(), out.data(), n, dtype, ReduceOp::kSum);
    EXPECT_EQ(out, in);
    std::fill(out.begin(), out.end(), 0);
    comm->allgather(in.data(), out.data(), n, dtype);
    EXPECT_EQ(out, in);
    std::fill(out.begin(), out.end(), 0);
    const std::vector<std::size_t> counts = {n};
    comm->reduce_scatter(in.data(), out.data(), counts, dtype, ReduceOp::kSum);
    EXPECT_EQ(out, in);
    std::fill(out.begin(), out.end(), 0);
    comm->alltoall(in.data(), out.data(), n, dtype);
    EXPECT_EQ(out, in);
    std::fill(out.begin(), out.end(), 0);
    comm->alltoallv(in.data(), counts, {}, out.data(), counts, {}, dtype);
    EXPECT_EQ(out, in);
  }
  EXPECT_EQ(comm->bytes().sent, 0u);
  EXPECT_EQ(comm->bytes().calls, 5u * std::size(testing::kAllDTypes));
}

TEST(SelfCommunicator, AllgathervHonoursDisplacementAndAvgIsIdentity) {
  auto comm = make_self_communicator();
  std::vector<float> in = {1.5f, -2.0f, 3.25f}, out(5, 7.0f);
  const std::vector<std::size_t> counts = {3}, displs = {2};
  comm->allgatherv(in.data(), out.data(), counts, displs, DType::kF32);
  EXPECT_EQ(out, (std::vector<float>{7.0f, 7.0f, 1.5f, -2.0f, 3.25f}));
  comm->allreduce(in.data(), in.data(), 3, DType::kF32, ReduceOp::kAvg);
  EXPECT_EQ(in, (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

TEST(SelfCommunicator, SendToSelfIsBufferedPerTag) {
  auto comm = make_self_communicator();
  const std::vector<std::int32_t> a = {1, 2, 3}, b = {4, 5};
  comm->send(a.data(), 3, DType::kI32, 0, 7);
  comm->send(b.data(), 2, DType::kI32, 0, 8);
  std::vector<std::int32_t> got_b(2), got_a(3);
  comm->recv(got_b.data(), 2, DType::kI32, 0, 8);
  comm->recv(got_a.data(), 3, DType::kI32, 0, 7);
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
}

using SelfCommunicatorDeathTest = ::testing::Test;

TEST_F(SelfCommunicatorDeathTest, BadArgumentsNameTheCallAndValue) {
  auto comm = make_self_communicator();
  std::vector<std::int32_t> x(4);
  EXPECT_DEATH(comm->allreduce(x.data(), x.data(), 4, DType::kI32, ReduceOp::kAvg),
               "allreduce: ReduceOp::kAvg needs f32, f16 or bf16, got i32");
  const std::vector<std::size_t> two = {1, 1};
  EXPECT_DEATH(comm->reduce_scatter(x.data(), x.data(), two, DType::kI32, ReduceOp::kSum),
               "reduce_scatter: counts has 2 entries but the world has 1 ranks");
  EXPECT_DEATH(comm->broadcast(x.data(), 4, DType::kI32, 3),
               "broadcast: root 3 is outside the world of 1 ranks");
  EXPECT_DEATH(comm->recv(x.data(), 4, DType::kI32, 0, 5), "no message with tag 5");
  EXPECT_DEATH(comm->allgather(nullptr, x.data(), 4, DType::kI32),
               "allgather: input is null but 16 bytes");
  // As MPI refuses them (arg_checks.h; review, 2026-12-06: one rank accepted both).
  EXPECT_DEATH(comm->send(x.data(), 4, DType::kI32, 0, -1), "send: tag -1 is negative");
  comm->send(x.data(), 4, DType::kI32, 0, 2);
  EXPECT_DEATH(comm->recv(x.data(), 4, DType::kI32, 0, -2), "recv: tag -2 is negative");
  EXPECT_DEATH(comm->recv(nullptr, 4, DType::kI32, 0, 2), "recv: buffer is null but 16 bytes");
}

}  // namespace
}  // namespace sparq::comm
