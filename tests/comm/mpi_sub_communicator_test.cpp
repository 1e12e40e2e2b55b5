// make_mpi_communicator_on (comm/mpi_communicator_on.h): communicators over the halves of
// MPI_COMM_WORLD (even and odd world ranks) run their collectives within their half only,
// side by side, ranked as in the half; before it sparq always took MPI_COMM_WORLD, so one MPI
// job could not hold two trainers (review of the embedding API, 2026-12-06).
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "comm/mpi_communicator_on.h"
#include "comm_test_util.h"

namespace sparq::comm {
namespace {

TEST(MpiSubCommunicator, HalvesOfTheWorldReduceApart) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm half = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half), MPI_SUCCESS);
  {
    auto made = make_mpi_communicator_on(half, {.wait = testing::test_mpi_wait()});
    ASSERT_TRUE(made.is_ok()) << made.status().message();
    Communicator& comm = **made;
    // The half of world ranks with this parity, in world order.
    std::vector<int> members;
    for (int r = world_rank % 2; r < world_size; r += 2) members.push_back(r);
    ASSERT_EQ(comm.size(), static_cast<int>(members.size()));
    EXPECT_EQ(members[comm.rank()], world_rank);
    float mine = static_cast<float>(world_rank), sum = 0.0f;
    comm.allreduce(&mine, &sum, 1, DType::kF32, ReduceOp::kSum);
    float want = 0.0f;
    for (int r : members) want += static_cast<float>(r);
    EXPECT_EQ(sum, want);
    std::vector<std::int32_t> all(members.size(), -1);
    const std::int32_t own = world_rank;
    comm.allgather(&own, all.data(), 1, DType::kI32);
    for (std::size_t i = 0; i < members.size(); ++i) EXPECT_EQ(all[i], members[i]);
  }
  MPI_Comm_free(&half);
  auto none = make_mpi_communicator_on(MPI_COMM_NULL);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("MPI_COMM_NULL"), std::string::npos);
}

}  // namespace
}  // namespace sparq::comm
