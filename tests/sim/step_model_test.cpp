// The step timeline (sim/step_model.h) on a hand-made case: 3 layers, 2 dense buckets, P = 2,
// alpha = 0, beta = 1 ns per byte, so a bucket of n floats costs 2 (P-1)/P 4n beta = 4n ns.
// forward 10 ms; backward intervals layer 2: 2 ms, layer 1: 3 ms, layer 0: 4 ms, so layer 2
// is ready at 12 ms, layer 1 at 15, layer 0 (backward's end) at 19; optimizer 1 ms. The last
// bucket to go also carries the step's non-finite agreement (Note [Control messages]): one
// int32 by the ring, 4 bytes sent, 4 ns.
#include <gtest/gtest.h>

#include "sim/step_model.h"

namespace sparq::sim {
namespace {

SimBucket dense(int index, int ready_layer, double cost_ms) {
  SimBucket b;
  b.index = index;
  b.ready_layer = ready_layer;
  b.numel = static_cast<std::int64_t>(cost_ms * 250000);  // 4n ns = cost
  return b;
}

StepInput three_layers(double cost0_ms, double cost1_ms, int ready1 = 1) {
  return {0.010, {0.004, 0.003, 0.002}, 0.001, {dense(0, 2, cost0_ms), dense(1, ready1, cost1_ms)}};
}

const StepOptions kTwo{.world_size = 2, .link = {0, 1e-9}};
constexpr double kAgreeMs = 4e-6;

TEST(StepModel, FullyHidden) {
  // bucket 0: 12..14, bucket 1: 15..18, backward ends at 19.
  const StepResult r = simulate_step(three_layers(2, 3), kTwo);
  EXPECT_NEAR(r.forward_ms, 10, 1e-9);
  EXPECT_NEAR(r.backward_ms, 9, 1e-9);
  ASSERT_EQ(r.buckets.size(), 2u);
  EXPECT_NEAR(r.buckets[0].start_ms, 12, 1e-9);
  EXPECT_NEAR(r.buckets[0].end_ms, 14, 1e-9);
  EXPECT_NEAR(r.buckets[1].start_ms, 15, 1e-9);
  EXPECT_NEAR(r.buckets[1].end_ms, 18 + kAgreeMs, 1e-9);
  EXPECT_NEAR(r.comm_end_ms, 19, 1e-9);  // backward's end: nothing is left over
  EXPECT_NEAR(r.exposed_comm_ms, 0, 1e-9);
  EXPECT_NEAR(r.step_ms, 20, 1e-9);
  EXPECT_NEAR(single_worker_step_ms(three_layers(2, 3)), 20, 1e-9);
  // Ring allreduce over 2 ranks: each rank sends half of each of its two blocks' passes = 4n.
  EXPECT_DOUBLE_EQ(r.bytes_sent, 4.0 * (500000 + 750000) + 4);
}

TEST(StepModel, PartlyHidden) {
  // bucket 0: 12..17; bucket 1 ready at 15 waits for the comm thread: 17..21.
  const StepResult r = simulate_step(three_layers(5, 4), kTwo);
  EXPECT_NEAR(r.buckets[1].ready_ms, 15, 1e-9);
  EXPECT_NEAR(r.buckets[1].start_ms, 17, 1e-9);
  EXPECT_NEAR(r.comm_end_ms, 21 + kAgreeMs, 1e-9);
  EXPECT_NEAR(r.exposed_comm_ms, 2 + kAgreeMs, 1e-9);
  EXPECT_NEAR(r.step_ms, 22 + kAgreeMs, 1e-9);
}

TEST(StepModel, CommunicationSlowedWhileBackwardComputes) {
  // Note [Communication under compute], rate 0.5 before backward's end (19 ms).
  StepOptions busy = kTwo;
  busy.busy_comm_rate = 0.5;
  // Costs 2 and 1 ms: bucket 0 12..16 (all of it busy: 2 / 0.5), bucket 1 from 16 (ready at
  // 15, waits) works 3 ms x 0.5 = 1.5 >= 1 before 19: ends at 16 + 1 / 0.5 = 18.
  StepResult r = simulate_step(three_layers(2, 1), busy);
  EXPECT_NEAR(r.buckets[0].end_ms, 16, 1e-9);
  EXPECT_NEAR(r.buckets[1].start_ms, 16, 1e-9);
  EXPECT_NEAR(r.buckets[1].end_ms, 18 + kAgreeMs / 0.5, 1e-9);
  EXPECT_NEAR(r.exposed_comm_ms, 0, 1e-9);
  // Costs 5 and 4 ms: bucket 0 from 12 works 7 x 0.5 = 3.5 of its 5 by 19, then 1.5 at full
  // rate: ends at 20.5; bucket 1 starts after backward: 20.5..24.5.
  r = simulate_step(three_layers(5, 4), busy);
  EXPECT_NEAR(r.buckets[0].end_ms, 20.5, 1e-9);
  EXPECT_NEAR(r.buckets[1].end_ms, 24.5 + kAgreeMs, 1e-9);
  EXPECT_NEAR(r.exposed_comm_ms, 5.5 + kAgreeMs, 1e-9);
  // Rate 1 is the plain model, bit for bit.
  busy.busy_comm_rate = 1.0;
  EXPECT_EQ(simulate_step(three_layers(5, 4), busy).step_ms,
            simulate_step(three_layers(5, 4), kTwo).step_ms);
  busy.busy_comm_rate = 0;
  EXPECT_DEATH_IF_SUPPORTED(simulate_step(three_layers(5, 4), busy), "busy_comm_rate");
}

TEST(StepModel, FullyExposed) {
  // Without overlap both start at backward's end: 19..21..24.
  StepOptions no_overlap = kTwo;
  no_overlap.overlap = false;
  const StepResult r = simulate_step(three_layers(2, 3), no_overlap);
  EXPECT_NEAR(r.buckets[0].start_ms, 19, 1e-9);
  EXPECT_NEAR(r.comm_end_ms, 24 + kAgreeMs, 1e-9);
  EXPECT_NEAR(r.exposed_comm_ms, 5 + kAgreeMs, 1e-9);
  EXPECT_NEAR(r.step_ms, 25 + kAgreeMs, 1e-9);
  // A bucket of layer 0 is ready only at backward's end: all of its cost is exposed.
  const StepResult last = simulate_step(three_layers(2, 3, /*ready1=*/0), kTwo);
  EXPECT_NEAR(last.buckets[1].start_ms, 19, 1e-9);
  EXPECT_NEAR(last.exposed_comm_ms, 3 + kAgreeMs, 1e-9);
}

TEST(StepModel, ReadinessOrderNotIndexOrder) {
  // Bucket 0 is ready later than bucket 1: the comm thread takes bucket 1 first.
  StepInput in = three_layers(2, 3);
  in.buckets[0].ready_layer = 0;
  in.buckets[1].ready_layer = 2;
  const StepResult r = simulate_step(in, kTwo);
  EXPECT_EQ(r.buckets[0].index, 1);
  EXPECT_NEAR(r.buckets[0].start_ms, 12, 1e-9);
  EXPECT_NEAR(r.buckets[1].start_ms, 19, 1e-9);
}

TEST(StepModel, HeldBucketsLaunchInReadinessOrder) {
  // comm.overlap: false holds both until backward's end (19), then submits them in the order
  // they became ready (Note [Readiness launch order]): bucket 1 (its layer ready at 12) first,
  // 19..22, then bucket 0, 22..24 with the agreement. By index, bucket 0 went first.
  StepInput in = three_layers(2, 3);
  in.buckets[0].ready_layer = 0;
  in.buckets[1].ready_layer = 2;
  StepOptions no_overlap = kTwo;
  no_overlap.overlap = false;
  const StepResult r = simulate_step(in, no_overlap);
  ASSERT_EQ(r.buckets.size(), 2u);
  EXPECT_EQ(r.buckets[0].index, 1);
  EXPECT_NEAR(r.buckets[0].ready_ms, 19, 1e-9);
  EXPECT_NEAR(r.buckets[0].start_ms, 19, 1e-9);
  EXPECT_NEAR(r.buckets[0].end_ms, 22, 1e-9);
  EXPECT_EQ(r.buckets[1].index, 0);
  EXPECT_NEAR(r.buckets[1].start_ms, 22, 1e-9);
  EXPECT_NEAR(r.buckets[1].end_ms, 24 + kAgreeMs, 1e-9);
  EXPECT_NEAR(r.step_ms, 25 + kAgreeMs, 1e-9);
}

TEST(StepModel, OneWorkerSendsNothing) {
  const StepResult r = simulate_step(three_layers(5, 4), {.world_size = 1, .link = {0, 1e-9}});
  EXPECT_NEAR(r.exposed_comm_ms, 0, 1e-9);
  EXPECT_EQ(r.bytes_sent, 0);
  EXPECT_NEAR(r.step_ms, 20, 1e-9);
}

TEST(StepModel, CompressedCosts) {
  // allgather of 1000-byte messages for 1e6 floats at P = 4, encode 4 GB/s, decode 8 GB/s:
  // encode 1 ms, allgather 3 (alpha + 1000 beta), 4 decodes of 0.5 ms.
  SimBucket b;
  b.numel = 1000000;
  b.kind = CommKind::kAllgather;
  b.message_bytes = [](std::int64_t) { return 1000.0; };
  b.codec = {4, 8};
  const StepOptions four{.world_size = 4, .link = {1e-5, 1e-9}};
  EXPECT_NEAR(bucket_cost_s(b, four), 1e-3 + 3 * (1e-5 + 1e-6) + 4 * 0.5e-3, 1e-15);
  EXPECT_DOUBLE_EQ(bucket_bytes_sent(b, 4), 3000);  // the ring forwards 3 blocks
  // A tenth of the profile's kept entries (SimBucket::decode_scale): a tenth of each decode.
  // Priced per float whatever the density, 1e-4 paid 1%'s decode (review, 2026-12-07).
  b.decode_scale = 0.1;
  EXPECT_NEAR(bucket_cost_s(b, four), 1e-3 + 3 * (1e-5 + 1e-6) + 4 * 0.05e-3, 1e-15);
  // The first decode's zero fill of the bucket, once (SimBucket::fill_gbps): 4 MB at 40 GB/s.
  b.fill_gbps = 40;
  EXPECT_NEAR(bucket_cost_s(b, four), 1e-3 + 3 * (1e-5 + 1e-6) + 0.1e-3 + 4 * 0.05e-3, 1e-15);
  b.decode_scale = 1;
  b.fill_gbps = 0;
  // two_phase: regions of 250000 floats, messages of 1000 bytes (this formula ignores n);
  // before each phase its 8-byte sizes, by alltoall and allgather (Note [Control messages]).
  b.kind = CommKind::kTwoPhase;
  const double region_decode = 4 * 250000 / 8e9;
  const double sizes = 2 * 3 * (1e-5 + 8e-9);
  EXPECT_NEAR(bucket_cost_s(b, four),
              1e-3 + 3 * (1e-5 + 1e-6) + 4 * region_decode + 4 * 250000 / 4e9 + 3 * (1e-5 + 1e-6) +
                  4 * region_decode + sizes,
              1e-15);
  EXPECT_DOUBLE_EQ(bucket_bytes_sent(b, 4), 3000 + 3000 + 2 * 3 * 8);
  // Without server compression the region results travel as dense f32 and are not coded
  // again (found in review: they were priced as re-compressed messages).
  b.server_compression = false;
  EXPECT_NEAR(bucket_cost_s(b, four),
              1e-3 + 3 * (1e-5 + 1e-6) + 4 * region_decode + 3 * (1e-5 + 4 * 250000 * 1e-9) + sizes,
              1e-15);
  EXPECT_DOUBLE_EQ(bucket_bytes_sent(b, 4), 3000 + 3 * 4 * 250000 + 2 * 3 * 8);
}

// The tree broadcasts the global index set as its count and k int32 indices
// (gtopk_aggregator.cpp), not as the message's index coding.
TEST(StepModel, TreePricesTheIndexBroadcastAsSent) {
  SimBucket b;
  b.numel = 1000000;
  b.kind = CommKind::kTree;
  b.message_bytes = [](std::int64_t) { return 5000.0; };  // about 1000 entries, short indices
  b.kept = [](std::int64_t) { return 1000.0; };
  b.codec = {1e9, 1e9};
  // Rank 0's bytes, as its metrics count them: the root sends no tree message or header; it
  // starts the chain broadcasts of k, of the count and of the k indices, and takes its part
  // in the ring allreduce of the k values (4000 bytes: 2 (P-1)/P of them).
  EXPECT_DOUBLE_EQ(bucket_bytes_sent(b, 2), 8 + 8 + 4 * 1000 + 4000);
  EXPECT_DOUBLE_EQ(bucket_bytes_sent(b, 4), 8 + 8 + 4 * 1000 + 6000);
}

// The tree never decodes its result (gtopk_aggregator.cpp: ops::fill of the bucket, then the k
// agreed values), and a merge by encode zero-fills its dense sum every round (dense_.assign):
// priced as one more decode(n) and no fill (review, 2026-12-07). 1e6 floats at P = 4 on a free
// link: encode 1 ms, decode 0.5 ms, fill 0.1 ms.
TEST(StepModel, TreeFillsTheResultInsteadOfDecodingIt) {
  SimBucket b;
  b.numel = 1000000;
  b.kind = CommKind::kTree;
  b.message_bytes = [](std::int64_t) { return 5000.0; };
  b.kept = [](std::int64_t) { return 1000.0; };
  b.codec = {4, 8};
  b.fill_gbps = 40;
  const StepOptions four{.world_size = 4, .link = {0, 0}};
  // encode + 2 rounds' decodes + the result's fill (was encode + 3 decodes: 2.5 ms)
  EXPECT_NEAR(bucket_cost_s(b, four), 1e-3 + 2 * 0.5e-3 + 0.1e-3, 1e-15);
  // + per round the dense sum's fill, the second decode and the encode (was 5.5 ms)
  b.merges_by_encode = true;
  EXPECT_NEAR(bucket_cost_s(b, four), 2.1e-3 + 2 * (0.1e-3 + 0.5e-3 + 1e-3), 1e-15);
}

// Note [Control messages]: with beta = 0 and no codec time a bucket's cost counts latencies.
// Found in review: the sizes and counts sent before the payloads were not priced.
TEST(StepModel, ControlMessagesAreLatencies) {
  const double a = 1e-5;
  const StepOptions eight{.world_size = 8, .link = {a, 0}};
  SimBucket b;
  b.numel = 1000000;
  b.message_bytes = [](std::int64_t) { return 5000.0; };
  b.kept = [](std::int64_t) { return 1000.0; };
  // Tree at P = 8: 3 rounds + 3 (index broadcast) + 14 (ring allreduce of the values) for the
  // payload; 3 (k broadcast) + 3 (a size header a round) + 3 (count broadcast) of control.
  b.kind = CommKind::kTree;
  EXPECT_NEAR(bucket_cost_s(b, eight), (20 + 9) * a, 1e-15);
  // two_phase: alltoall and allgather of 7 steps each, and the same again for the sizes.
  b.kind = CommKind::kTwoPhase;
  EXPECT_NEAR(bucket_cost_s(b, eight), (14 + 14) * a, 1e-15);
  b.server_compression = false;  // dense region results: their sizes still travel
  EXPECT_NEAR(bucket_cost_s(b, eight), (14 + 14) * a, 1e-15);
  // Under --gather best at P = 1024 the fixed-size alltoall of the sizes and both allgathers
  // may take log2 P steps (Bruck, recursive doubling), but the region messages are an
  // MPI_Alltoallv, run pairwise: 1023 steps. They were priced as Bruck's 10 (review,
  // 2026-12-06), which made two_phase look 25x cheaper in latency at P = 1024.
  b.server_compression = true;
  const StepOptions wide{.world_size = 1024, .link = {a, 0}, .gather = "best"};
  EXPECT_NEAR(bucket_cost_s(b, wide), (1023 + 10 + 10 + 10) * a, 1e-12);
  // allgather: the sizes first only when the messages have no fixed size.
  b.kind = CommKind::kAllgather;
  EXPECT_NEAR(bucket_cost_s(b, eight), 7 * a, 1e-15);
  b.sizes_exchanged = true;
  EXPECT_NEAR(bucket_cost_s(b, eight), 14 * a, 1e-15);
  EXPECT_DOUBLE_EQ(bucket_bytes_sent(b, 8), 7 * 5000 + 7 * 8);
}

// Note [Control messages]: the step's last plan bucket ends with the non-finite agreement,
// one int32 allreduced; the tied rows' tail job comes after it and does not repeat it.
TEST(StepModel, StepEndsWithTheNonfiniteAgreement) {
  const double a = 1e-5;
  const StepOptions four{.world_size = 4, .link = {a, 0}};
  StepInput in{0.010, {0.004, 0.003, 0.002}, 0.001, {dense(0, 2, 1), dense(1, 0, 1)}};
  StepResult r = simulate_step(in, four);  // each bucket is a ring allreduce: 6 alpha
  EXPECT_NEAR(r.buckets[0].end_ms - r.buckets[0].start_ms, 6 * a * 1e3, 1e-12);
  EXPECT_NEAR(r.buckets[1].end_ms - r.buckets[1].start_ms, 12 * a * 1e3, 1e-12);
  SimBucket rows;
  rows.index = 2;
  rows.kind = CommKind::kTiedRows;
  in.buckets.push_back(rows);
  r = simulate_step(in, four);
  EXPECT_NEAR(r.buckets[1].end_ms - r.buckets[1].start_ms, 12 * a * 1e3, 1e-12);
  EXPECT_NEAR(r.buckets[2].end_ms - r.buckets[2].start_ms, 9 * a * 1e3, 1e-12);  // 3 allgathers
  EXPECT_EQ(simulate_step(in, {.world_size = 1, .link = {a, 0}}).exposed_comm_ms, 0);
}

}  // namespace
}  // namespace sparq::sim
