// Which GPU a rank opens (train/rank_device.h) and the refusal of two ranks on one physical
// GPU (comm/device_identity.h): pure rules, tested without a device.
#include "train/rank_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "comm/device_identity.h"

namespace sparq::train {
namespace {

LocalRank local(int rank, int size) { return {rank, size, "OMPI_COMM_WORLD_LOCAL_RANK"}; }

TEST(RankDevice, EveryRankSeesTheNodesGpusAndOpensItsLocalRank) {
  EXPECT_EQ(rank_device_ordinal(local(0, 1), 1, nullptr).value(), 0);
  EXPECT_EQ(rank_device_ordinal(local(3, 4), 4, nullptr).value(), 3);
  EXPECT_EQ(rank_device_ordinal(local(1, 2), 8, "0,1,2,3,4,5,6,7").value(), 1);
}

TEST(RankDevice, AGpuBoundToEachProcessIsDeviceZero) {
  // srun --gpus-per-task=1: each of the node's 4 ranks sees its own GPU as device 0.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(rank_device_ordinal(local(r, 4), 1, "0").value(), 0);
}

TEST(RankDevice, TooFewGpusAreRefusedNamingTheCounts) {
  const Status few = rank_device_ordinal(local(2, 4), 2, "0,1").status();
  ASSERT_FALSE(few.is_ok());
  EXPECT_NE(few.message().find("runs 4 rank(s) and this process sees 2 GPU(s)"), std::string::npos)
      << few.message();
  EXPECT_NE(few.message().find("CUDA_VISIBLE_DEVICES=0,1"), std::string::npos) << few.message();
  const Status none = rank_device_ordinal(local(0, 1), 0, nullptr).status();
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.message().find("sees no GPU (CUDA_VISIBLE_DEVICES=unset)"), std::string::npos)
      << none.message();
}

// A build without CUDA says so, where it said "this process sees no GPU" on a GPU host too
// (new-user review, 2026-12-06). A CUDA build opens the device instead (tests/train's cuda
// tests).
TEST(RankDevice, ABuildWithoutCudaSaysSo) {
#if SPARQ_HAS_CUDA
  GTEST_SKIP() << "built with CUDA";
#else
  const Status s = open_rank_device(local(0, 1), GemmPrecision::kF32).status();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("this sparq was built without CUDA"), std::string::npos)
      << s.message();
#endif
}

// The node's size comes from the launcher that gave the rank: Open MPI's local rank inside a
// Slurm allocation took SLURM_NTASKS_PER_NODE (the allocation's) when Open MPI's local size
// was missing (review, 2026-12-06).
TEST(RankDevice, TheLocalSizeComesFromTheRanksLauncher) {
  const char* names[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                         "OMPI_COMM_WORLD_LOCAL_SIZE",
                         "MPI_LOCALRANKID",
                         "MPI_LOCALNRANKS",
                         "SLURM_LOCALID",
                         "SLURM_NTASKS_PER_NODE"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* n : names) {
    if (const char* v = std::getenv(n)) saved.emplace_back(n, v);
    ::unsetenv(n);
  }
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  ::setenv("SLURM_NTASKS_PER_NODE", "8", 1);
  auto alone = local_rank_from_environment(2);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  auto paired = local_rank_from_environment(2);
  for (const char* n : names) ::unsetenv(n);
  for (const auto& [n, v] : saved) ::setenv(n.c_str(), v.c_str(), 1);
  ASSERT_TRUE(alone.is_ok()) << alone.status().message();
  EXPECT_EQ(alone->rank, 1);
  EXPECT_EQ(alone->size, 2);  // rank + 1, not Slurm's 8
  ASSERT_TRUE(paired.is_ok()) << paired.status().message();
  EXPECT_EQ(paired->size, 2);
}

TEST(DeviceIdentity, TheFirstPairOnOneHostAndOneGpuIsFound) {
  using comm::DeviceIdentity;
  // Two hosts (7, 9), each with devices A=(1, 2) and B=(1, 3); the same UUID on another host
  // is another GPU.
  std::vector<DeviceIdentity> ranks{{7, 1, 2}, {7, 1, 3}, {9, 1, 2}, {9, 1, 3}};
  EXPECT_FALSE(comm::first_shared_device(ranks).has_value());
  ranks.push_back({9, 1, 3});  // rank 4 opened rank 3's GPU
  ranks.push_back({7, 1, 2});  // rank 5 opened rank 0's GPU: (3, 4) is the one reported
  const auto shared = comm::first_shared_device(ranks);
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(*shared, std::make_pair(3, 4));
  EXPECT_FALSE(comm::first_shared_device(std::vector<DeviceIdentity>{}).has_value());
}

}  // namespace
}  // namespace sparq::train
