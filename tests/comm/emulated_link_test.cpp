// The host flavour of the emulated slow link (comm/emulated_link.h): the price of a call, and
// the decorator passing calls and byte counts through. Its time is not asserted here (no
// timing in tests); the GPU flavour's delay is checked in nccl_one_rank_test.cpp.
#include "comm/emulated_link.h"

#include <gtest/gtest.h>

#include <vector>

namespace sparq::comm {
namespace {

TEST(EmulatedLink, PricesLatencyPlusTheLargerDirectionOverTheBandwidth) {
  const EmulatedLink link{.gbit_per_s = 8.0, .latency_us = 20.0};
  EXPECT_TRUE(link.enabled());
  // 8 Gbit/s moves one byte per nanosecond: 1e6 bytes take 1000 us.
  EXPECT_DOUBLE_EQ(link.call_us({.sent = 1'000'000, .received = 10}), 1020.0);
  EXPECT_DOUBLE_EQ(link.call_us({.sent = 10, .received = 2'000'000}), 2020.0);
  EXPECT_DOUBLE_EQ(link.call_us({}), 20.0);
  const EmulatedLink latency_only{.latency_us = 5.0};
  EXPECT_DOUBLE_EQ(latency_only.call_us({.sent = 1u << 30}), 5.0);
  EXPECT_FALSE(EmulatedLink{}.enabled());
  EXPECT_FALSE(EmulatedLink{.ranks = 4}.enabled());  // a world without a link costs nothing
}

TEST(EmulatedLink, HostLinkPassesCallsAndBytesThrough) {
  auto link = make_emulated_link(make_self_communicator(), {.latency_us = 1.0});
  EXPECT_EQ(link->backend(), "self+emulated-link");
  std::vector<float> in{1.0f, 2.0f, 3.0f}, out(3);
  link->allreduce(in.data(), out.data(), 3, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(out, in);
  EXPECT_EQ(link->bytes().calls, 1u);
}

TEST(EmulatedLink, HostLinkRefusesAnEmulatedWorld) {
  EXPECT_DEATH(
      (void)make_emulated_link(make_self_communicator(), EmulatedLink{.gbit_per_s = 1, .ranks = 4}),
      "one-rank NCCL communicator");
}

}  // namespace
}  // namespace sparq::comm
