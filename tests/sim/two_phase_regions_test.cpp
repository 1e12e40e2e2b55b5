// two_phase's regions in the simulator (review, 2026-12-07): closed forms where P-length loops
// and vectors made `simulate --plan auto --world 1048576` take 22 s, the same numbers as
// before for every size, and with P > n only the non-empty regions priced: an empty region
// has no message and no result (two_phase_aggregator.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "comm/byte_model.h"
#include "sim/auto_plan.h"
#include "sim/step_model.h"

namespace sparq::sim {
namespace {

// A sparse-like message: header, an index bitmap, 1% of the floats.
double message(std::int64_t n) {
  return 12.0 + std::ceil(n / 8.0) + 4.0 * std::ceil(0.01 * static_cast<double>(n));
}

SimBucket two_phase(std::int64_t n, bool server_compression = true) {
  SimBucket b;
  b.numel = n;
  b.kind = CommKind::kTwoPhase;
  b.message_bytes = message;
  b.kept = [](std::int64_t m) { return std::ceil(0.01 * static_cast<double>(m)); };
  b.server_compression = server_compression;
  return b;
}

// plan_payload_bytes before the closed form: a loop over the P regions.
double payload_by_loop(const SimBucket& b, int p) {
  const std::int64_t n = b.numel;
  double bytes = 0;
  for (std::int64_t j = 0; j < p; ++j) {
    const std::int64_t len = n * (j + 1) / p - n * j / p;
    if (len > 0) bytes += b.message_bytes(len);
  }
  const std::int64_t own = n / p;
  if (own > 0) bytes += b.server_compression ? b.message_bytes(own) : 4.0 * own;
  return bytes;
}

const std::vector<std::pair<std::int64_t, int>> kSizes = {
    {1000000, 4}, {1000003, 7}, {6553600, 1024}, {6553601, 1000}, {10, 3},
    {7, 7},       {5, 8},       {1, 1024},       {1000, 1048576}, {26214400, 1048576}};

TEST(TwoPhaseRegions, PlanPayloadIsTheLoopsInClosedForm) {
  for (const auto& [n, p] : kSizes) {
    for (bool server : {true, false}) {
      const SimBucket b = two_phase(n, server);
      EXPECT_EQ(plan_payload_bytes(b, p), payload_by_loop(b, p)) << n << " floats, P=" << p;
    }
  }
}

// Rank 0's bytes before the fix: P-1 messages of the largest region's size, P-1 results
// forwarded (byte_model's alltoallv and ring allgatherv over P-length vectors), and the
// 8-byte sizes of both phases.
double sent_before(const SimBucket& b, int p) {
  const std::int64_t region = (b.numel + p - 1) / p;
  const auto m = static_cast<std::size_t>(b.message_bytes(region));
  const std::size_t result = b.server_compression ? m : 4 * static_cast<std::size_t>(region);
  const std::vector<std::size_t> blocks(p, m), results(p, result), sizes(p, 8);
  return static_cast<double>(comm::alltoallv_bytes(blocks, blocks, 1, 0).sent +
                             comm::ring_allgatherv_bytes(results, 1, 0).sent +
                             comm::alltoallv_bytes(sizes, sizes, 1, 0).sent +
                             comm::ring_allgatherv_bytes(sizes, 1, 0).sent);
}

// Rank 0's bytes as byte_model counts the real regions: an empty one sends and gathers 0.
double sent_by_region(const SimBucket& b, int p) {
  std::vector<std::size_t> blocks(p), results(p);
  const std::int64_t region = (b.numel + p - 1) / p;
  for (int j = 0; j < p; ++j) {
    const std::int64_t len = b.numel * (j + 1) / p - b.numel * j / p;
    // The simulator prices every non-empty region at the largest one's size.
    blocks[j] = len > 0 ? static_cast<std::size_t>(b.message_bytes(region)) : 0;
    results[j] = len > 0 ? (b.server_compression ? blocks[j] : 4 * region) : 0;
  }
  const std::vector<std::size_t> sizes(p, 8);
  return static_cast<double>(comm::alltoallv_bytes(blocks, blocks, 1, 0).sent +
                             comm::ring_allgatherv_bytes(results, 1, 0).sent +
                             comm::alltoallv_bytes(sizes, sizes, 1, 0).sent +
                             comm::ring_allgatherv_bytes(sizes, 1, 0).sent);
}

TEST(TwoPhaseRegions, BytesUnchangedForNormalSizesAndOnlyNonEmptyRegionsPastThem) {
  for (const auto& [n, p] : kSizes) {
    for (bool server : {true, false}) {
      const SimBucket b = two_phase(n, server);
      const double sent = bucket_bytes_sent(b, p);
      if (n >= p) {
        EXPECT_EQ(sent, sent_before(b, p)) << n << " floats, P=" << p;
      }
      EXPECT_EQ(sent, sent_by_region(b, p)) << n << " floats, P=" << p;
    }
  }
  // 5 floats on 8 ranks, regions of 0, 1, 0, 1, 1, 0, 1, 1 floats: rank 0's is empty, so it
  // sends a message to each of the 5 non-empty ones, and forwards their results but its
  // neighbour's (region 1): 4. The simulator sent 7 of each.
  EXPECT_EQ(bucket_bytes_sent(two_phase(5), 8), 5 * message(1) + 4 * message(1) + 2 * 7 * 8);
  EXPECT_LT(bucket_bytes_sent(two_phase(5), 8), sent_before(two_phase(5), 8));
}

TEST(TwoPhaseRegions, CostDecodesOnlyNonEmptyResults) {
  // A free link, encode 4 GB/s, decode 8 GB/s: with 5 floats on 8 ranks the owner still
  // decodes 8 messages for its region, but the bucket only 5 region results (it was 8).
  SimBucket b = two_phase(5);
  b.codec = {4, 8};
  const StepOptions eight{.world_size = 8, .link = {0, 0}};
  const double enc = 4.0 / 4e9, dec = 4.0 / 8e9;  // one float
  EXPECT_NEAR(bucket_cost_s(b, eight), 5 * enc + 8 * dec + enc + 5 * dec, 1e-20);
  // Normal sizes: P results, as before.
  b = two_phase(80);
  b.codec = {4, 8};
  EXPECT_NEAR(bucket_cost_s(b, eight), 80 * enc + 8 * 10 * dec + 10 * enc + 8 * 10 * dec, 1e-20);
}

}  // namespace
}  // namespace sparq::sim
