// MPI backend, reducing collectives (allreduce, reduce_scatter) and byte accounting, run by
// ctest under mpirun with 1 to 4 ranks. Every input is a small integer so sums are exact in
// every dtype and results are compared with ==.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>

#include "comm/byte_model.h"
#include "comm/mpi_communicator.h"
#include "comm_test_util.h"

namespace sparq::comm {
namespace {

using testing::decode;
using testing::encode;
using testing::kAllDTypes;
using testing::kFloatDTypes;
using testing::make_comm;

constexpr std::size_t kSizes[] = {0, 1, 7, 1001, 4099};

TEST(MpiCommunicator, MatchesWorldAndNamesItsBackend) {
  auto comm = make_comm();
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(comm->rank(), rank);
  EXPECT_EQ(comm->size(), size);
  EXPECT_EQ(comm->backend(), "mpi");
  EXPECT_EQ(comm->device(), Device::kCPU);
}

TEST(MpiCommunicator, AllreduceSumIsExactForEveryDtypeSizeAndPlacement) {
  auto comm = make_comm();
  for (DType dtype : kAllDTypes) {
    for (std::size_t n : kSizes) {
      const auto expected = testing::summed_values(comm->size(), n);
      const auto in = encode(dtype, testing::rank_values(comm->rank(), n));
      std::vector<char> out(in.size(), 0x5a);
      comm->allreduce(in.data(), out.data(), n, dtype, ReduceOp::kSum);
      EXPECT_EQ(decode(dtype, out.data(), n), expected) << dtype_name(dtype) << " n=" << n;
      EXPECT_EQ(in, encode(dtype, testing::rank_values(comm->rank(), n))) << "input modified";

      auto inout = in;
      comm->allreduce(inout.data(), inout.data(), n, dtype, ReduceOp::kSum);
      EXPECT_EQ(decode(dtype, inout.data(), n), expected) << "in place " << dtype_name(dtype);
    }
  }
}

TEST(MpiCommunicator, AllreduceAvgIsExactForFloatDtypes) {
  auto comm = make_comm();
  const double shift = testing::zero_sum_shift(comm->rank(), comm->size());
  for (DType dtype : kFloatDTypes) {
    for (std::size_t n : kSizes) {
      std::vector<double> mine = testing::rank_values(0, n);  // the same base on every rank
      const std::vector<double> expected = mine;
      for (double& v : mine) v += shift;
      auto buffer = encode(dtype, mine);
      comm->allreduce(buffer.data(), buffer.data(), n, dtype, ReduceOp::kAvg);
      EXPECT_EQ(decode(dtype, buffer.data(), n), expected) << dtype_name(dtype) << " n=" << n;
    }
  }
}

TEST(MpiCommunicator, AllreduceHandlesOverlappingButDistinctBuffers) {
  auto comm = make_comm();
  const std::size_t n = 101;
  // Input at [1, n+1), output at [0, n): overlapping, so it must be staged, not aliased.
  std::vector<double> host(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) host[i + 1] = testing::value_at(comm->rank(), i);
  auto bytes = encode(DType::kF32, host);
  comm->allreduce(bytes.data() + 4, bytes.data(), n, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(decode(DType::kF32, bytes.data(), n), testing::summed_values(comm->size(), n));
}

// Uneven per-rank blocks: rank r owns (r * 5 + 3) % 7 elements (3, 1, 6, 4); with_zero
// empties rank 1's block.
std::vector<std::size_t> uneven_counts(int size, bool with_zero) {
  std::vector<std::size_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = (r * 5 + 3) % 7;
  if (with_zero && size > 1) counts[1] = 0;
  return counts;
}

TEST(MpiCommunicator, ReduceScatterSumAndAvgWithUnevenAndZeroCounts) {
  auto comm = make_comm();
  const int rank = comm->rank(), size = comm->size();
  for (bool with_zero : {false, true}) {
    const auto counts = uneven_counts(size, with_zero);
    const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    const std::size_t offset = packed_displs(counts)[rank];
    for (DType dtype : kAllDTypes) {
      const auto in = encode(dtype, testing::rank_values(rank, total));
      std::vector<char> out(counts[rank] * dtype_size(dtype));
      comm->reduce_scatter(in.data(), out.data(), counts, dtype, ReduceOp::kSum);
      EXPECT_EQ(decode(dtype, out.data(), counts[rank]),
                testing::summed_values(size, counts[rank], offset))
          << dtype_name(dtype) << " with_zero=" << with_zero;

      // In place: the result lands in this rank's own block of the input.
      auto inout = in;
      char* own = inout.data() + offset * dtype_size(dtype);
      comm->reduce_scatter(inout.data(), own, counts, dtype, ReduceOp::kSum);
      EXPECT_EQ(decode(dtype, own, counts[rank]),
                testing::summed_values(size, counts[rank], offset))
          << "in place " << dtype_name(dtype);
    }
    for (DType dtype : kFloatDTypes) {
      auto base = testing::rank_values(0, total);
      for (double& v : base) v += testing::zero_sum_shift(rank, size);
      const auto in = encode(dtype, base);
      std::vector<char> out(counts[rank] * dtype_size(dtype));
      comm->reduce_scatter(in.data(), out.data(), counts, dtype, ReduceOp::kAvg);
      EXPECT_EQ(decode(dtype, out.data(), counts[rank]),
                testing::rank_values(0, counts[rank], offset))
          << "avg " << dtype_name(dtype);
    }
  }
}

// The counters follow the ring model of byte_model.h; summed over ranks, what was sent was
// received.
TEST(MpiCommunicator, CountsRingBytesAndCalls) {
  auto comm = make_comm();
  const int size = comm->size();
  const std::size_t n = 1003;
  std::vector<float> buffer(n, 1.0f);
  comm->reset_bytes();
  comm->allreduce(buffer.data(), buffer.data(), n, DType::kF32, ReduceOp::kSum);
  const WireBytes expected = ring_allreduce_bytes(n, 4, comm->rank(), size);
  EXPECT_EQ(comm->bytes().sent, expected.sent);
  EXPECT_EQ(comm->bytes().received, expected.received);
  EXPECT_EQ(comm->bytes().calls, 1u);

  const auto counts = uneven_counts(size, true);
  std::vector<float> gathered(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  std::vector<float> mine(counts[comm->rank()], 2.0f);
  comm->allgatherv(mine.data(), gathered.data(), counts, {}, DType::kF32);
  comm->barrier();
  EXPECT_EQ(comm->bytes().calls, 3u);

  std::uint64_t local[2] = {comm->bytes().sent, comm->bytes().received}, global[2] = {0, 0};
  MPI_Allreduce(local, global, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(global[0], global[1]);
  // Ring allreduce moves 2(P-1) * n elements in total, ring allgatherv (P-1) * sum(counts).
  const std::uint64_t total_counts = gathered.size();
  EXPECT_EQ(global[0], (2 * (size - 1) * n + (size - 1) * total_counts) * 4);
  comm->reset_bytes();
  EXPECT_EQ(comm->bytes().sent, 0u);
  EXPECT_EQ(comm->bytes().calls, 0u);
}

}  // namespace
}  // namespace sparq::comm
