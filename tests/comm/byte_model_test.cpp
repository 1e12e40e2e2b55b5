// The ring byte model: hand-computed cases and the conservation law (summed over ranks,
// every byte sent is received).
#include "comm/byte_model.h"
#include "comm/communicator.h"

#include <gtest/gtest.h>

#include <vector>

namespace sparq::comm {
namespace {

TEST(ByteModel, AllreduceMatchesTheTextbookVolumeWhenDivisible) {
  // n = 8 f32 over 4 ranks: blocks of 2, 2(P-1)/P * 32 bytes = 48 each way.
  for (int r = 0; r < 4; ++r) {
    const WireBytes b = ring_allreduce_bytes(8, 4, r, 4);
    EXPECT_EQ(b.sent, 48u);
    EXPECT_EQ(b.received, 48u);
  }
  EXPECT_EQ(ring_allreduce_bytes(1000, 4, 0, 1).sent, 0u);
}

TEST(ByteModel, AllreduceWithUnevenBlocks) {
  // n = 5 over 3 ranks: blocks 2, 2, 1. Rank 0 sends 2n - b0 - b1 = 6 and receives
  // 2n - b2 - b0 = 7 elements.
  const WireBytes b = ring_allreduce_bytes(5, 1, 0, 3);
  EXPECT_EQ(b.sent, 6u);
  EXPECT_EQ(b.received, 7u);
}

TEST(ByteModel, ConservationForEveryCollective) {
  const std::vector<std::size_t> counts = {3, 0, 6, 4, 1};
  const int size = static_cast<int>(counts.size());
  std::uint64_t sent[4] = {}, received[4] = {};
  for (int r = 0; r < size; ++r) {
    const WireBytes parts[4] = {
        ring_allreduce_bytes(1001, 2, r, size), ring_allgatherv_bytes(counts, 4, r),
        ring_reduce_scatter_bytes(counts, 4, r), chain_broadcast_bytes(77, 8, r, 3, size)};
    for (int k = 0; k < 4; ++k) {
      sent[k] += parts[k].sent;
      received[k] += parts[k].received;
    }
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(sent[k], received[k]) << "collective " << k;
  EXPECT_EQ(sent[0], 2u * (size - 1) * 1001 * 2);
  EXPECT_EQ(sent[1], (size - 1) * 14u * 4);
  EXPECT_EQ(sent[2], (size - 1) * 14u * 4);
  EXPECT_EQ(sent[3], (size - 1) * 77u * 8);
}

TEST(ByteModel, AllgathervRankReceivesEveryOtherBlock) {
  const std::vector<std::size_t> counts = {3, 0, 6};
  const WireBytes b = ring_allgatherv_bytes(counts, 4, 2);
  EXPECT_EQ(b.received, 3u * 4);     // blocks of ranks 0 and 1
  EXPECT_EQ(b.sent, (9u - 3u) * 4);  // all but rank 0's block, which ends its trip here
}

TEST(ByteModel, AlltoallvSkipsTheSelfBlock) {
  const std::vector<std::size_t> send = {1, 2, 3}, recv = {4, 5, 6};
  const WireBytes b = alltoallv_bytes(send, recv, 2, 1);
  EXPECT_EQ(b.sent, (1u + 3u) * 2);
  EXPECT_EQ(b.received, (4u + 6u) * 2);
}

TEST(ByteModel, BroadcastChain) {
  // Chain 2 -> 3 -> 0 -> 1: rank 1 is last and sends nothing; the root receives nothing.
  EXPECT_EQ(chain_broadcast_bytes(10, 1, 2, 2, 4).received, 0u);
  EXPECT_EQ(chain_broadcast_bytes(10, 1, 2, 2, 4).sent, 10u);
  EXPECT_EQ(chain_broadcast_bytes(10, 1, 1, 2, 4).sent, 0u);
  EXPECT_EQ(chain_broadcast_bytes(10, 1, 1, 2, 4).received, 10u);
}

TEST(ByteModel, PackedDisplacements) {
  const std::vector<std::size_t> counts = {3, 0, 6, 4};
  EXPECT_EQ(packed_displs(counts), (std::vector<std::size_t>{0, 3, 3, 9}));
  EXPECT_EQ(total_count(counts), 13u);
}

}  // namespace
}  // namespace sparq::comm
