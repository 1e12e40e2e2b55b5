// Sizes that peers send are checked before anything is allocated for them (comm/gather.h):
// a world of two whose peer "sends" a forged size, through each exchange that reads one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/gather.h"
#include "comm/sparse_rows.h"
#include "common/unexpected_communicator.h"

namespace sparq::comm {
namespace {

// Rank 0 of two. Every i64 that the peer (rank 1) contributes to an allgather is `forged`;
// byte and float payloads are zeros. Nothing else may be called.
class ForgedSizes final : public ::sparq::testing::UnexpectedCommunicator {
 public:
  explicit ForgedSizes(std::int64_t forged) : forged_(forged) {}
  void allgather(const void* in, void* out, std::size_t count, DType dtype) override {
    const std::size_t bytes = count * dtype_size(dtype);
    if (in == nullptr || out == nullptr) return;  // GCC's unity-build devirtualisation warns
    std::memcpy(out, in, bytes);
    if (dtype == DType::kI64 && count == 1) {
      std::memcpy(static_cast<std::uint8_t*>(out) + bytes, &forged_, bytes);
    } else {
      std::memset(static_cast<std::uint8_t*>(out) + bytes, 0, bytes);
    }
  }
  void allgatherv(const void* in, void* out, std::span<const std::size_t> counts,
                  std::span<const std::size_t>, DType dtype) override {  // packed
    std::size_t offset = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      const std::size_t bytes = counts[r] * dtype_size(dtype);
      if (bytes == 0) continue;
      if (r == 0) {
        std::memcpy(out, in, bytes);
      } else {
        std::memset(static_cast<std::uint8_t*>(out) + offset, 0, bytes);
      }
      offset += bytes;
    }
  }

 private:
  std::int64_t forged_;
};

// Unchecked, -1 became 2^64 - 1: std::length_error thrown between two collectives, which
// left this rank's collectives out of step with its peers' (review, 2026-12-07).
TEST(PeerSizes, AllgatherBytesEndsTheJobOnAForgedPeerSize) {
  const std::vector<std::uint8_t> mine(10, 7);
  std::vector<std::uint8_t> recv;
  std::vector<std::size_t> counts, displs;
  {
    ForgedSizes honest(12);  // within the bound: gathered
    allgather_bytes(honest, mine, std::nullopt, 16, recv, counts, displs);
    EXPECT_EQ(counts, (std::vector<std::size_t>{10, 12}));
    EXPECT_EQ(recv.size(), 22u);
  }
  for (const std::int64_t forged : {std::int64_t{-1}, std::int64_t{17}, std::int64_t{1} << 40}) {
    ForgedSizes comm(forged);
    EXPECT_DEATH(allgather_bytes(comm, mine, std::nullopt, 16, recv, counts, displs),
                 "rank 1 sent a size of " + std::to_string(forged) +
                     " for its allgather, outside \\[0, 16\\]")
        << forged;
  }
  // This rank's own string above the bound is its own bug: refused before it is sent.
  ForgedSizes comm(0);
  EXPECT_DEATH(allgather_bytes(comm, mine, std::nullopt, 9, recv, counts, displs),
               "allgather of 10 bytes from this rank, above the bound 9");
}

TEST(PeerSizes, SparseRowsRefuseMoreRowsThanTheTableHas) {
  const std::vector<std::int32_t> rows = {1, 3};
  const std::vector<float> values(4, 1.0f);  // width 2
  std::vector<float> table(2 * 5, 0.0f);     // 5 rows
  ForgedSizes honest(5);
  SparseRowExchange exchange;
  exchange.add_average(honest, rows, values, 2, table.data(), 5);
  EXPECT_EQ(table[2], 0.5f);  // row 1, averaged over two ranks; the peer's rows are zeros
  for (const std::int64_t forged : {std::int64_t{-3}, std::int64_t{6}}) {
    ForgedSizes comm(forged);
    EXPECT_DEATH(exchange.add_average(comm, rows, values, 2, table.data(), 5),
                 "rank 1 sent a size of " + std::to_string(forged) + " for its sparse row count")
        << forged;
  }
}

}  // namespace
}  // namespace sparq::comm
