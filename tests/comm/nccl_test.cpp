// NCCL backend under mpirun: exact collectives on device buffers, bootstrapped over MPI.
// Skips with a message when sparq was built without NCCL, a rank has no CUDA device, or a node
// runs more ranks than it has GPUs (as on CI, or np 2 on one GPU); other errors fail. The skip
// decision is collective so that no rank enters NCCL init alone.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "comm/mpi_communicator.h"
#include "comm_test_util.h"
#include "core/buffer.h"

#ifdef SPARQ_HAS_NCCL
#include "comm/byte_model.h"
#include "comm/nccl_communicator.h"
#include "core/cuda/cuda_check.h"
#include "nccl_skip.h"
#endif

namespace sparq::comm {
namespace {

#ifdef SPARQ_HAS_NCCL
Buffer upload(const std::vector<char>& host) {
  Buffer b = Buffer::device(host.size() + 1);
  CUDA_CHECK(cudaMemcpy(b.data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  return b;
}
std::vector<char> download(const Buffer& b, std::size_t bytes) {
  std::vector<char> host(bytes);
  CUDA_CHECK(cudaMemcpy(host.data(), b.data(), bytes, cudaMemcpyDeviceToHost));
  return host;
}
#endif

TEST(NcclCommunicator, ExactCollectivesOnDeviceBuffers) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int have_gpu = cuda_available() ? 1 : 0, all_have = 0;
  MPI_Allreduce(&have_gpu, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
#ifndef SPARQ_HAS_NCCL
  GTEST_SKIP() << "sparq was built without NCCL: skipped";
#else
  if (!all_have) GTEST_SKIP() << "no CUDA device on some rank: NCCL test skipped";
  auto bootstrap = make_mpi_communicator();
  ASSERT_TRUE(bootstrap.is_ok()) << bootstrap.status().message();
  const bool too_few_gpus = testing::fewer_gpus_than_ranks_on_this_node();
  auto made = make_nccl_communicator(*bootstrap.value());
  if (!made.is_ok() && too_few_gpus) GTEST_SKIP() << made.status().message();
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  NcclCommunicator& comm = *made.value();
  const int rank = comm.rank();
  EXPECT_EQ(comm.backend(), "nccl");
  for (DType dtype : testing::kFloatDTypes) {
    for (std::size_t n : {0, 1, 1001}) {
      const auto in = testing::encode(dtype, testing::rank_values(rank, n));
      Buffer d_in = upload(in), d_out = Buffer::device(in.size() + 1);
      comm.allreduce(d_in.data(), d_out.data(), n, dtype, ReduceOp::kSum);
      EXPECT_EQ(testing::decode(dtype, download(d_out, in.size()).data(), n),
                testing::summed_values(size, n))
          << dtype_name(dtype) << " n=" << n;
      comm.allreduce(d_in.data(), d_in.data(), n, dtype, ReduceOp::kSum);
      EXPECT_EQ(testing::decode(dtype, download(d_in, in.size()).data(), n),
                testing::summed_values(size, n))
          << "in place";
    }
  }
  // Uneven allgatherv and reduce_scatter, with an empty block.
  std::vector<std::size_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = r == 1 ? 0 : 3 + 2 * r;
  const auto displs = packed_displs(counts);
  const std::size_t total = total_count(counts);
  const auto mine = testing::encode(DType::kF32, testing::rank_values(rank, counts[rank]));
  Buffer d_mine = upload(mine), d_all = Buffer::device(total * 4 + 4);
  comm.allgatherv(d_mine.data(), d_all.data(), counts, {}, DType::kF32);
  const auto all = download(d_all, total * 4);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(testing::decode(DType::kF32, all.data() + displs[r] * 4, counts[r]),
              testing::rank_values(r, counts[r]));
  }
  const auto full = testing::encode(DType::kI32, testing::rank_values(rank, total));
  Buffer d_full = upload(full), d_part = Buffer::device(counts[rank] * 4 + 4);
  comm.reduce_scatter(d_full.data(), d_part.data(), counts, DType::kI32, ReduceOp::kSum);
  EXPECT_EQ(testing::decode(DType::kI32, download(d_part, counts[rank] * 4).data(), counts[rank]),
            testing::summed_values(size, counts[rank], displs[rank]));
  comm.barrier();
  EXPECT_GT(comm.bytes().calls, 0u);
#endif
}

}  // namespace
}  // namespace sparq::comm
