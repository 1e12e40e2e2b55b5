// comm.plan: auto's search (sim/auto_plan.h): never worse than the fixed plan it starts from,
// deterministic, dense where the codec is the bottleneck, and the ratio constraint enforced.
#include <gtest/gtest.h>

#include <set>

#include "sim/auto_plan.h"
#include "train/train_config.h"

namespace sparq::sim {
namespace {

MachineProfile profile(double codec_gbps) {
  return parse_profile(fmt::format(R"(name: plan-test
source: "made up for the test"
compute:
  flops: {{matmul_tflops: 0.2, memory_gbps: 20, optimizer_ns_per_param: 1}}
codecs:
  lbs: {{encode_gbps: {0}, decode_gbps: {0}}}
  topk: {{encode_gbps: {0}, decode_gbps: {0}}}
networks:
  - {{name: slow, alpha_us: 100, gbps: 0.1}}
  - {{name: fast, alpha_us: 1, gbps: 1000}}
)", codec_gbps), "plan-test.yaml").value();
}

train::TrainConfig config(const std::string& compressor) {
  return train::parse_train_config(
             "model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64}\n"
             "data: {seq_len: 64}\n"
             "comm: {first_bucket_mb: 0.25, bucket_mb: 1}\n"
             "compress: {name: " + compressor + "}\n",
             "plan.yaml", {})
      .value();
}

TEST(AutoPlan, NeverWorseThanTheFixedPlanAndDeterministic) {
  const train::TrainConfig c = config("lbs");
  auto layout = build_layout(c).value();
  const MachineProfile p = profile(2.0);
  for (int world : {2, 8, 64}) {
    auto plan = choose_auto_plan(*layout, c, p, p.network("slow").value(), world, 1.0);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    EXPECT_LE(plan->predicted_step_ms, plan->fixed_step_ms + 1e-9) << "P=" << world;
    const comm::BucketPlan& bp = plan->tied_split ? *layout->split_plan : *layout->plan;
    ASSERT_EQ(plan->bucket_choice.size(), bp.size());
    const std::set<std::string> allowed = {"", "dense", "allreduce", "allgather", "two_phase",
                                           "tree"};
    for (const std::string& s : plan->bucket_choice) EXPECT_TRUE(allowed.count(s)) << s;
    auto again = choose_auto_plan(*layout, c, p, p.network("slow").value(), world, 1.0);
    EXPECT_EQ(again->bucket_choice, plan->bucket_choice);
    EXPECT_FALSE(plan->reasons.empty());
  }
}

// With the tied embedding split (a vocabulary much larger than a step's tokens: one sequence
// a rank, Note [Tied split cost]) the rows' tail job is not a bucket: one choice per bucket of
// the split plan.
TEST(AutoPlan, OneChoicePerBucketWithTheTiedSplit) {
  const train::TrainConfig c = train::parse_train_config(
      "model: {preset: gpt2-tiny, vocab_size: 50257, n_ctx: 128}\ndata: {seq_len: 128}\n"
      "train: {micro_batch: 1}\n"
      "comm: {first_bucket_mb: 0.25, bucket_mb: 1}\ncompress: {name: lbs}\n",
      "split.yaml", {}).value();
  auto layout = build_layout(c).value();
  const MachineProfile p = profile(2.0);
  auto plan = choose_auto_plan(*layout, c, p, p.network("slow").value(), 2, 1.0);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_TRUE(plan->tied_split);
  EXPECT_EQ(plan->bucket_choice.size(), layout->split_plan->size());
}

TEST(AutoPlan, SendsDenseWhenCodingCostsMoreThanTheBytesSave) {
  const train::TrainConfig c = config("lbs");
  auto layout = build_layout(c).value();
  const MachineProfile p = profile(0.01);  // 10 MB/s codecs on a 1 Tbit/s link
  auto plan = choose_auto_plan(*layout, c, p, p.network("fast").value(), 4, 1.0);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  EXPECT_GT(std::count(plan->bucket_choice.begin(), plan->bucket_choice.end(), "dense"), 0);
  EXPECT_LT(plan->predicted_step_ms, plan->fixed_step_ms);
  // A ratio the all-dense choice cannot meet keeps buckets compressed.
  auto constrained = choose_auto_plan(*layout, c, p, p.network("fast").value(), 4, 20.0);
  ASSERT_TRUE(constrained.is_ok()) << constrained.status().message();
  EXPECT_GE(constrained->compression_ratio, 20.0);
  auto impossible = choose_auto_plan(*layout, c, p, p.network("fast").value(), 4, 1e6);
  ASSERT_FALSE(impossible.is_ok());
  EXPECT_NE(impossible.status().message().find("comm.plan_min_compression"), std::string::npos);
}

TEST(AutoPlan, RefusesAnUncompressedConfig) {
  const train::TrainConfig c = config("none");
  auto layout = build_layout(c).value();
  const MachineProfile p = profile(1.0);
  auto plan = choose_auto_plan(*layout, c, p, p.network("slow").value(), 2, 1.0);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("compress.name is none"), std::string::npos);
}

}  // namespace
}  // namespace sparq::sim
