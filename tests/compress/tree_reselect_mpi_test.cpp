// The tree strategy's re-selection (Note [The tree re-selects from the dense sum],
// gtopk_aggregator.h) on 2, 3 and 4 ranks: the global set G equals a simulation of the
// binomial tree in which every receiver keeps the top-k of the two lists' sum as a dense
// vector, on buckets whose sums cancel and whose lists hold zeros, where selecting among the
// union only (the code before 2026-12-06) chose other indices than the device tree does; and
// lbs's lists, which merge by decode and encode.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "compress/error_feedback.h"
#include "compress/gtopk_aggregator.h"
#include "compress/quant_math.h"
#include "compress/sparse_format.h"
#include "compress/topk_select.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

// Rank r's bucket in three flavours. kCancelling: +base on even ranks, -base on odd ones, so a
// pair's lists name the same indices and sum to zero (the union holds only zeros, and the
// dense sum's top-k takes the bucket's lowest indices). kSparse: two non-zeros per rank, so
// each list is padded with zeros. kNormal: no zero anywhere.
enum class Flavour { kCancelling, kSparse, kNormal };

std::vector<float> bucket_for(Flavour flavour, int rank, std::size_t n) {
  if (flavour == Flavour::kNormal) return testing::normal_vector(n, 300 + rank);
  if (flavour == Flavour::kCancelling) {
    std::vector<float> a = testing::normal_vector(n, 299);
    if (rank % 2 == 1) {
      for (float& v : a) v = -v;
    }
    return a;
  }
  std::vector<float> a(n, 0.0f);
  a[(11 * rank + 40) % n] = 1.0f + static_cast<float>(rank);
  a[(11 * rank + 45) % n] = -2.0f - static_cast<float>(rank);
  return a;
}

// The tree of gtopk_aggregator.h, step 2, over dense vectors: each rank's local list (the
// compressor's own message), then per round the receiver's list becomes the top-k of the
// dense sum (ties to the lowest index). Returns rank 0's list, ascending.
std::vector<std::uint32_t> simulated_global_set(const std::vector<std::vector<float>>& a,
                                                Compressor& c, const EncodeContext& ctx) {
  const int p = static_cast<int>(a.size());
  const std::size_t n = a[0].size();
  std::vector<std::vector<float>> dense(p, std::vector<float>(n, 0.0f));
  std::size_t k = 0;
  for (int r = 0; r < p; ++r) {
    Message msg;
    EncodeContext own = ctx;
    own.rank = r;
    c.encode(a[r], own, msg);
    std::vector<std::uint32_t> indices;
    std::vector<float> values;
    parse_sparse_f32(msg, n, indices, values, "simulation");
    if (r == 0) k = indices.size();
    for (std::size_t j = 0; j < indices.size(); ++j) dense[r][indices[j]] = 0.0f + values[j];
  }
  TopkSelector selector;
  std::vector<std::uint32_t> kept;
  for (int dist = 1; dist < p; dist <<= 1) {
    for (int r = 0; r + dist < p; r += 2 * dist) {
      std::vector<float> sum(n);
      for (std::size_t i = 0; i < n; ++i) sum[i] = dense[r][i] + dense[r + dist][i];
      selector.exact(sum, k, kept);
      std::fill(dense[r].begin(), dense[r].end(), 0.0f);
      for (std::uint32_t i : kept) dense[r][i] = sum[i];
    }
  }
  if (p == 1) selector.exact(dense[0], k, kept);
  return kept;
}

TEST(TreeReselection, TheGlobalSetIsTheTopKOfTheDenseSums) {
  auto made = comm::make_mpi_communicator();
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  comm::Communicator& comm = **made;
  const int p = comm.size(), me = comm.rank();
  for (const char* name : {"gtopk", "topk"}) {
    for (Flavour flavour : {Flavour::kCancelling, Flavour::kSparse, Flavour::kNormal}) {
      SCOPED_TRACE(std::string(name) + ", flavour " + std::to_string(static_cast<int>(flavour)));
      const std::size_t n = 64;  // at density 1/8, lists of 8
      auto c = testing::make(name, {{"density", "0.125"}});
      EncodeContext ctx;
      ctx.seed = 5;
      ctx.world_size = p;
      std::vector<std::vector<float>> a(p);
      for (int r = 0; r < p; ++r) a[r] = bucket_for(flavour, r, n);
      std::vector<float> bucket = a[me];
      GtopkAggregator tree;
      EncodeContext mine = ctx;
      mine.rank = me;
      ASSERT_TRUE(tree.run(bucket, *c, nullptr, comm, mine).is_ok());
      EXPECT_EQ(tree.global_indices(), simulated_global_set(a, *c, ctx));
    }
  }
  // The review's case (2 ranks, k = 1): lists {3: 1} and {3: -1} sum to zero, so the dense
  // sum's top-1 is index 0, not the union's 3.
  if (p == 2) {
    auto c = testing::make("topk", {{"density", "0.25"}});
    std::vector<float> bucket = {0, 0, 0, me == 0 ? 1.0f : -1.0f};
    GtopkAggregator tree;
    EncodeContext ctx;
    ctx.rank = me;
    ctx.world_size = p;
    ASSERT_TRUE(tree.run(bucket, *c, nullptr, comm, ctx).is_ok());
    EXPECT_EQ(tree.global_indices(), std::vector<std::uint32_t>{0});
  }
}

// The kept indices of a list in sparse_format.h's layout (any value section).
std::vector<std::uint32_t> kept_indices(const Message& msg, std::size_t n) {
  const SparseHeader h = read_sparse_header(msg, n, msg[9], "test");
  std::vector<std::uint32_t> out(h.count);
  for_each_index(h, msg.data() + kSparseHeaderBytes, n,
                 [&](std::uint32_t j, std::uint32_t i) { out[j] = i; });
  return out;
}

// lbs through the tree (CompressorCapabilities::merges_by_encode): low-bit lists merged by
// decoding both into a dense sum and encoding it again. G is the simulated tree's, the same on
// every rank, and the step is gtopk_aggregator.h's: the exact average of every rank's a on G,
// and a residual that keeps a off G. With stochastic rounding each merge draws from its own
// stream, rank p * (round + 2) + receiver (Note [Tree merge draws], spelled out here, not
// taken from the helper): re-encoding under the receiver's leaf stream, as the code did before
// 2026-12-06, chooses another G on 3 and 4 ranks.
void check_lbs_merges_by_encode(const std::string& rounding) {
  auto made = comm::make_mpi_communicator();
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  comm::Communicator& comm = **made;
  const int p = comm.size(), me = comm.rank();
  const std::size_t n = 4099;
  auto c = testing::make("lbs", {{"density", "0.01"}, {"bits", "4"}, {"rounding", rounding}});
  EncodeContext ctx;
  ctx.seed = 3;
  ctx.world_size = p;
  std::vector<std::vector<float>> a(p);
  for (int r = 0; r < p; ++r) a[r] = testing::normal_vector(n, 500 + r);
  // The simulated tree, with the compressor's own encode and decode; each list keeps the
  // context it was encoded under.
  std::vector<Message> lists(p);
  std::vector<EncodeContext> encoded_as(p, ctx);
  for (int r = 0; r < p; ++r) {
    encoded_as[r].rank = r;
    c->encode(a[r], encoded_as[r], lists[r]);
  }
  for (int dist = 1, round = 0; dist < p; dist <<= 1, ++round) {
    for (int r = 0; r + dist < p; r += 2 * dist) {
      std::vector<float> dense(n, 0.0f);
      const auto mark = [&](const Message& list) {  // Note [Listed zeros]
        for (std::uint32_t i : kept_indices(list, n)) {
          if (dense[i] == 0.0f) dense[i] = kListedZero;
        }
      };
      c->decode(lists[r], dense, 1.0f, DecodeMode::kAdd, encoded_as[r]);
      mark(lists[r]);
      c->decode(lists[r + dist], dense, 1.0f, DecodeMode::kAdd, encoded_as[r + dist]);
      mark(lists[r + dist]);
      encoded_as[r].rank = p * (round + 2) + r;
      c->encode(dense, encoded_as[r], lists[r]);
    }
  }
  const std::vector<std::uint32_t> want = kept_indices(lists[0], n);
  ASSERT_EQ(want.size(), 41u);  // round(0.01 * 4099)

  std::vector<float> bucket(n, 0.0f), residual(n, 0.0f);
  ErrorFeedback ef(residual);
  GtopkAggregator tree;
  EncodeContext mine = ctx;
  mine.rank = me;
  std::vector<float> g = a[me];
  ASSERT_TRUE(tree.run(g, *c, &ef, comm, mine).is_ok());
  EXPECT_EQ(tree.global_indices(), want);
  std::vector<bool> in_g(n, false);
  for (std::uint32_t i : want) in_g[i] = true;
  for (std::size_t i = 0; i < n; ++i) {
    float sum = 0.0f;
    for (int r = 0; r < p; ++r) sum += a[r][i];
    const float expected = in_g[i] ? sum / static_cast<float>(p) : 0.0f;
    ASSERT_NEAR(g[i], expected, 1e-6f) << i;
    ASSERT_EQ(residual[i], in_g[i] ? 0.0f : a[me][i]) << i;
  }
}

TEST(TreeReselection, LbsListsMergeByEncode) { check_lbs_merges_by_encode("nearest"); }

TEST(TreeReselection, LbsStochasticMergesDrawTheirOwnStreams) {
  check_lbs_merges_by_encode("stochastic");
}

// Note [Listed zeros]: at 2 bits on heavy-tailed gradients most kept values decode to 0; G is
// still drawn from what the ranks listed, never from positions no rank chose (a review found
// 593 of 655 entries of G outside every rank's list, most of them the bucket's lowest
// indices, before listed zeros were marked).
TEST(TreeReselection, LbsGlobalSetComesFromTheRanksLists) {
  auto made = comm::make_mpi_communicator();
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  comm::Communicator& comm = **made;
  const int p = comm.size(), me = comm.rank();
  const std::size_t n = 65536;
  auto c = testing::make("lbs", {{"density", "0.01"}, {"bits", "2"}});
  EncodeContext ctx;
  ctx.seed = 3;
  ctx.world_size = p;
  std::vector<bool> listed(n, false);
  std::vector<float> mine;
  for (int r = 0; r < p; ++r) {
    std::vector<float> a = testing::normal_vector(n, 900 + r);
    for (float& v : a) v = v * v * v;  // heavy tails: a few large values set each block's scale
    EncodeContext own = ctx;
    own.rank = r;
    Message list;
    c->encode(a, own, list);
    for (std::uint32_t i : kept_indices(list, n)) listed[i] = true;
    if (r == me) mine = a;
  }
  GtopkAggregator tree;
  EncodeContext own = ctx;
  own.rank = me;
  ASSERT_TRUE(tree.run(mine, *c, nullptr, comm, own).is_ok());
  ASSERT_EQ(tree.global_indices().size(), 655u);
  std::size_t outside = 0;
  for (std::uint32_t i : tree.global_indices()) outside += listed[i] ? 0 : 1;
  EXPECT_EQ(outside, 0u) << "entries of G that no rank listed";
}

}  // namespace
}  // namespace sparq::compress
