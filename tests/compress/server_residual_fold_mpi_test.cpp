// Note [A server residual no server sends] (compress/gradient_exchange.h) under mpirun: a
// two_phase exchange with server compression runs a step; its state is loaded by one without
// server compression, whose fold must give every rank, over region j, its own residual plus
// owner j's server residual, so that the mean the ranks send later gains exactly s. Before,
// the loaded s sat in the aggregator, never sent, and was saved again at every checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "comm/gather.h"
#include "comm/mpi_communicator.h"
#include "compress/two_phase_aggregator.h"
#include "exchange_fixture.h"

namespace sparq::compress {
namespace {

using Fixture = testing::ExchangeFixture;

GradientExchangeConfig two_phase_config(bool server_compression) {
  GradientExchangeConfig c = testing::lbs_exchange_config();
  c.aggregation = "two_phase";
  c.aggregator.server_compression = server_compression;
  return c;
}

TEST(ServerResidualFoldMpi, EveryRankGainsEachOwnersServerResidual) {
  auto made = comm::make_mpi_communicator();
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  comm::Communicator& comm = **made;
  const auto p = static_cast<std::size_t>(comm.size());
  Fixture f;
  auto before = f.make(two_phase_config(true));
  ASSERT_NE(before, nullptr);
  f.fill_grads(100 + static_cast<std::uint32_t>(comm.rank()));
  for (const comm::Bucket& b : f.plan.buckets()) {
    ASSERT_TRUE(before->average_bucket(comm, b, 0).is_ok());
  }
  // The state as a checkpoint keeps it (copied: save_state()'s views are the exchange's).
  const std::vector<StateTensor> saved = before->save_state();
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<StateTensor> state;
  for (const StateTensor& s : saved) {
    const auto* data = s.tensor.data<std::uint8_t>();
    bytes.emplace_back(data, data + s.tensor.nbytes());
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    state.push_back({saved[i].name, Tensor(bytes[i].data(), DType::kU8,
                                           {static_cast<std::int64_t>(bytes[i].size())})});
  }
  const std::vector<float> e(before->residual().begin(), before->residual().end());

  auto after = f.make(two_phase_config(false));
  ASSERT_NE(after, nullptr);
  std::copy(e.begin(), e.end(), after->residual().begin());  // as a resume reads it
  ASSERT_TRUE(after->load_state(state, comm.rank(), comm.size()).is_ok());
  auto fold = after->fold_loaded_server_residual(comm);
  ASSERT_TRUE(fold.is_ok()) << fold.status().message();

  double mass = 0;
  std::size_t compressed = 0;
  std::vector<std::uint8_t> recv;
  std::vector<std::size_t> counts, displs;
  for (const comm::Bucket& b : f.plan.buckets()) {
    if (b.dense) continue;
    ++compressed;
    // Every owner's server residual, as its checkpoint file holds it.
    const Tensor& mine = state[2 * (compressed - 1) + 1].tensor;
    ASSERT_EQ(state[2 * (compressed - 1) + 1].name, fmt::format("bucket{}.aggregator", b.index));
    const auto n = static_cast<std::size_t>(b.range.count);
    comm::allgather_bytes(comm, {mine.data<std::uint8_t>(), mine.nbytes()}, std::nullopt, 4 * n,
                          recv, counts, displs);
    for (std::size_t j = 0; j < p; ++j) {
      const std::size_t begin = two_phase_region_begin(n, p, j);
      ASSERT_EQ(counts[j], 4 * (two_phase_region_begin(n, p, j + 1) - begin));
      for (std::size_t i = 0; i < counts[j] / 4; ++i) {
        float s;
        std::memcpy(&s, recv.data() + displs[j] + 4 * i, 4);
        mass += std::fabs(static_cast<double>(s));
        const std::size_t at = static_cast<std::size_t>(b.range.offset) + begin + i;
        ASSERT_EQ(after->residual()[at], e[at] + s)
            << "rank " << comm.rank() << ", bucket " << b.index << ", region " << j << " at "
            << i;
      }
    }
  }
  ASSERT_GT(compressed, 1u);
  ASSERT_GT(mass, 0.0) << "lbs at 5% kept no server residual: the test proves nothing";
  EXPECT_EQ(fold->folded.size(), compressed);
  EXPECT_TRUE(fold->dropped.empty());
  EXPECT_NEAR(fold->folded_mass, mass, 1e-12 * mass);
  // Nothing is left in the aggregators to be saved again.
  for (const StateTensor& s : after->save_state()) {
    if (s.name.ends_with(".aggregator")) {
      EXPECT_EQ(s.tensor.nbytes(), 0u) << s.name;
    }
  }
}

}  // namespace
}  // namespace sparq::compress
