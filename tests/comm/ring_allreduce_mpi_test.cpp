// The MPI backend's allreduce algorithms (comm.allreduce: mpi | ring | auto), run by ctest
// under mpirun. Rank r's input element i is (i % 17) + r + 1: every partial sum, in whatever
// order the ring or MPI adds, is an integer of at most 16 P + P (P + 1) / 2, exact in every
// tested dtype while that is at most 256, the integers bf16's 8 significant bits hold: up
// to P = 11 (kMaxExactRanks). So each result is compared byte for byte with the encoded
// reference, and a checksum gathered from all ranks shows they hold identical bytes. The
// inputs were (r + 1) * (i % 17) until 2026-12-07: exact up to P = 4 only, at 7 ranks a
// bf16 partial sum such as 13 * 21 = 273 needs 9 bits and rounded. Sizes cover empty segments
// (count < P), sub-chunk boundaries and several sub-chunks per segment.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/byte_model.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_ring.h"
#include "comm_test_util.h"

namespace sparq::comm {
namespace {

using testing::encode;
using testing::make_comm;

constexpr DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64};
constexpr AllreduceAlgorithm kAlgorithms[] = {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kMpi,
                                              AllreduceAlgorithm::kAuto};

const char* name(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::kAuto:
      return "auto";
    case AllreduceAlgorithm::kMpi:
      return "mpi";
    case AllreduceAlgorithm::kRing:
      return "ring";
  }
  return "?";
}

// Every rank adds at least 1 to every element, so a rank left out of a sum always shows.
double input_at(int rank, std::size_t i) { return static_cast<double>(i % 17) + rank + 1.0; }

// The largest P whose sums, at most 16 P + P (P + 1) / 2, stay exact in bf16 (<= 256).
constexpr int kMaxExactRanks = 11;

std::vector<double> inputs(int rank, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = input_at(rank, i);
  return v;
}

// Sum over ranks of input_at: P (i % 17) + P (P + 1) / 2.
std::vector<double> sums(int size, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<double>(i % 17) * size + size * (size + 1) / 2.0;
  }
  return v;
}

// Sizes: empty, smaller than P, odd, a 16-bit sub-chunk boundary crossed by one segment only
// (segment 0 one element longer, so ranks split neighbouring segments into different numbers
// of messages), and ~3M elements: several sub-chunks per segment, not divisible by 2, 3 or 4.
std::vector<std::size_t> sizes(int world, DType dtype) {
  const std::size_t piece = kRingChunkBytes / dtype_size(dtype);
  return {0, 1, 7, 1001, 4099, piece * world + 1, 3'000'001};
}

std::uint64_t fnv1a(const std::vector<char>& bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// True when every rank holds the same bytes.
bool identical_on_all_ranks(const std::vector<char>& bytes, int size) {
  const std::uint64_t mine = fnv1a(bytes);
  std::vector<std::uint64_t> all(size);
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (std::uint64_t h : all) {
    if (h != mine) return false;
  }
  return true;
}

// The ring's wire volume worked out by hand: P near-equal blocks, the first n % P one longer;
// rank r sends every block but r (reduce-scatter) and every block but r+1 (allgather), and
// receives every block but r-1 and every block but r.
WireBytes hand_ring_bytes(std::size_t n, std::size_t es, int rank, int size) {
  if (size == 1) return {};
  auto block = [&](int b) {
    b = (b % size + size) % size;
    return n / size + (static_cast<std::size_t>(b) < n % size ? 1 : 0);
  };
  return {(2 * n - block(rank) - block(rank + 1)) * es,
          (2 * n - block(rank - 1) - block(rank)) * es};
}

void expect_bytes(const Communicator& comm, const ByteCounters& before, std::size_t n, DType dtype,
                  const std::string& what) {
  const std::size_t es = dtype_size(dtype);
  const WireBytes model = ring_allreduce_bytes(n, es, comm.rank(), comm.size());
  const WireBytes hand = hand_ring_bytes(n, es, comm.rank(), comm.size());
  EXPECT_EQ(model.sent, hand.sent) << what;
  EXPECT_EQ(model.received, hand.received) << what;
  EXPECT_EQ(comm.bytes().sent - before.sent, model.sent) << what;
  EXPECT_EQ(comm.bytes().received - before.received, model.received) << what;
  EXPECT_EQ(comm.bytes().calls - before.calls, 1u) << what;
}

TEST(RingAllreduce, SumIsExactAndIdenticalOnEveryRankForEveryAlgorithm) {
  for (AllreduceAlgorithm algorithm : kAlgorithms) {
    auto comm = make_comm(algorithm);
    const int rank = comm->rank(), size = comm->size();
    ASSERT_LE(size, kMaxExactRanks)
        << "bf16 sums of these inputs round above " << kMaxExactRanks << " ranks";
    for (DType dtype : kDTypes) {
      for (std::size_t n : sizes(size, dtype)) {
        const std::string what = std::string(name(algorithm)) + " " +
                                 std::string(dtype_name(dtype)) + " n=" + std::to_string(n) +
                                 " P=" + std::to_string(size);
        const auto expected = encode(dtype, sums(size, n));
        const auto in = encode(dtype, inputs(rank, n));

        std::vector<char> out(in.size(), 0x5a);
        ByteCounters before = comm->bytes();
        comm->allreduce(in.data(), out.data(), n, dtype, ReduceOp::kSum);
        EXPECT_TRUE(out == expected) << "out of place " << what;
        EXPECT_TRUE(in == encode(dtype, inputs(rank, n))) << "input modified " << what;
        EXPECT_TRUE(identical_on_all_ranks(out, size)) << "out of place " << what;
        expect_bytes(*comm, before, n, dtype, "out of place " + what);

        auto inout = in;
        before = comm->bytes();
        comm->allreduce(inout.data(), inout.data(), n, dtype, ReduceOp::kSum);
        EXPECT_TRUE(inout == expected) << "in place " << what;
        EXPECT_TRUE(identical_on_all_ranks(inout, size)) << "in place " << what;
        expect_bytes(*comm, before, n, dtype, "in place " + what);
      }
    }
  }
}

TEST(RingAllreduce, AvgIsExactForFloatDtypes) {
  // The means are (i % 17) + (P + 1) / 2, multiples of 0.5 up to 22: exact in f32, f16 and
  // bf16, and the division by P (divide_host, as on the MPI path) of an exact sum is exact.
  for (AllreduceAlgorithm algorithm : kAlgorithms) {
    auto comm = make_comm(algorithm);
    const int rank = comm->rank(), size = comm->size();
    ASSERT_LE(size, kMaxExactRanks)
        << "bf16 sums of these inputs round above " << kMaxExactRanks << " ranks";
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (std::size_t n : sizes(size, dtype)) {
        const std::string what = std::string(name(algorithm)) + " " +
                                 std::string(dtype_name(dtype)) + " n=" + std::to_string(n) +
                                 " P=" + std::to_string(size);
        std::vector<double> means = sums(size, n);
        for (double& m : means) m /= size;
        const auto expected = encode(dtype, means);
        const auto in = encode(dtype, inputs(rank, n));
        std::vector<char> out(in.size(), 0x5a);
        comm->allreduce(in.data(), out.data(), n, dtype, ReduceOp::kAvg);
        EXPECT_TRUE(out == expected) << "out of place " << what;
        auto inout = in;
        comm->allreduce(inout.data(), inout.data(), n, dtype, ReduceOp::kAvg);
        EXPECT_TRUE(inout == expected) << "in place " << what;
        EXPECT_TRUE(identical_on_all_ranks(inout, size)) << what;
      }
    }
  }
}

TEST(RingAllreduce, OverlappingButDistinctBuffersAreNotAliased) {
  auto comm = make_comm(AllreduceAlgorithm::kRing);
  const std::size_t n = 300'001;
  const std::size_t es = dtype_size(DType::kF32);
  for (std::ptrdiff_t shift : {-1, 1}) {
    // Input starts `shift` elements after the output: the ranges overlap but differ.
    auto storage = encode(DType::kF32, std::vector<double>(n + 1, -1.0));
    char* out = storage.data() + (shift < 0 ? es : 0);
    char* in = out + shift * static_cast<std::ptrdiff_t>(es);
    const auto mine = encode(DType::kF32, inputs(comm->rank(), n));
    std::copy(mine.begin(), mine.end(), in);
    comm->allreduce(in, out, n, DType::kF32, ReduceOp::kSum);
    const std::vector<char> result(out, out + n * es);
    EXPECT_TRUE(result == encode(DType::kF32, sums(comm->size(), n))) << "shift " << shift;
  }
}

TEST(RingAllreduce, DoesNotMeetPointToPointTrafficWithTheSameTag) {
  // A message to the right neighbour with tag 0 is still unreceived when the ring runs; the
  // ring uses a communicator of its own, so neither the ring nor recv() gets the other's data.
  auto comm = make_comm(AllreduceAlgorithm::kRing);
  const int rank = comm->rank(), size = comm->size();
  if (size == 1) GTEST_SKIP() << "needs a neighbour";
  const std::int32_t token = 1000 + rank;
  std::int32_t got = -1;
  // Rank 0 sends first and receives last; the others receive before they send, so the
  // blocking send() calls below cannot deadlock whatever the eager limit.
  const std::size_t n = 5001;
  const auto in = encode(DType::kI32, inputs(rank, n));
  std::vector<char> out(in.size());
  if (rank == 0) {
    comm->send(&token, 1, DType::kI32, 1, 0);
    comm->allreduce(in.data(), out.data(), n, DType::kI32, ReduceOp::kSum);
    comm->recv(&got, 1, DType::kI32, size - 1, 0);
  } else {
    comm->allreduce(in.data(), out.data(), n, DType::kI32, ReduceOp::kSum);
    comm->recv(&got, 1, DType::kI32, rank - 1, 0);
    comm->send(&token, 1, DType::kI32, (rank + 1) % size, 0);
  }
  EXPECT_TRUE(out == encode(DType::kI32, sums(size, n)));
  EXPECT_EQ(got, 1000 + (rank - 1 + size) % size);
}

TEST(RingAllreduce, AlgorithmNamesParse) {
  EXPECT_EQ(allreduce_algorithm_from_name("auto"), AllreduceAlgorithm::kAuto);
  EXPECT_EQ(allreduce_algorithm_from_name("mpi"), AllreduceAlgorithm::kMpi);
  EXPECT_EQ(allreduce_algorithm_from_name("ring"), AllreduceAlgorithm::kRing);
  EXPECT_FALSE(allreduce_algorithm_from_name("tree").has_value());
}

}  // namespace
}  // namespace sparq::comm
