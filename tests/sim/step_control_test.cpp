// Note [Per-step control] (sim/step_model.h): the stop poll's 256-byte allreduce and, for a
// model that weighs counted targets, the 8-byte target count block before every step's
// forward; they were not in the model (review, 2026-12-07).
#include <gtest/gtest.h>

#include "sim/step_model.h"
#include "sim/workload.h"
#include "train/train_config.h"

namespace sparq::sim {
namespace {

// 3 layers, forward 10 ms, backward 2 + 3 + 4 ms, optimizer 1 ms, one dense bucket of 1e6
// floats ready at backward's end.
StepInput one_bucket() {
  SimBucket b;
  b.index = 0;
  b.ready_layer = 0;
  b.numel = 1000000;
  return {0.010, {0.004, 0.003, 0.002}, 0.001, {b}};
}

TEST(StepControl, BlocksBeforeTheForwardAndIsExposed) {
  const StepOptions o{.world_size = 8, .link = {1e-5, 1e-9}, .allreduce = "best"};
  const StepResult plain = simulate_step(one_bucket(), o);
  EXPECT_EQ(plain.control_ms, 0);
  StepInput in = one_bucket();
  in.polls_stop_signals = true;
  in.counts_targets = true;
  const double control_s = allreduce_s("best", 256, 8, o.link) + allreduce_s("best", 8, 8, o.link);
  EXPECT_NEAR(step_control_s(in, o), control_s, 1e-18);
  const StepResult r = simulate_step(in, o);
  EXPECT_NEAR(r.control_ms, control_s * 1e3, 1e-12);
  EXPECT_NEAR(r.step_ms, plain.step_ms + control_s * 1e3, 1e-9);
  EXPECT_NEAR(r.exposed_comm_ms, plain.exposed_comm_ms + control_s * 1e3, 1e-9);
  EXPECT_NEAR(r.forward_ms, plain.forward_ms, 1e-12);
  EXPECT_NEAR(r.backward_ms, plain.backward_ms, 1e-9);
  // Every bucket moves by the control's time: the forward starts after it.
  EXPECT_NEAR(r.buckets[0].start_ms, plain.buckets[0].start_ms + control_s * 1e3, 1e-9);
  // The trainer counts what the communicator counted (add_exposed_control): on rank 0 of a
  // ring of 8, 2 x 64 int32 less its two blocks of 8, and the int64's one block, 448 + 8 bytes.
  EXPECT_DOUBLE_EQ(r.bytes_sent, plain.bytes_sent + 456);
  EXPECT_DOUBLE_EQ(step_control_bytes(in, 8), 456);
  // The configured algorithm prices them: the ring's 14 latencies at P = 8.
  const StepOptions ring{.world_size = 8, .link = {1e-5, 1e-9}, .allreduce = "ring"};
  EXPECT_NEAR(step_control_s(in, ring),
              ring_allreduce_s(256, 8, ring.link) + ring_allreduce_s(8, 8, ring.link), 1e-18);
  in.counts_targets = false;
  EXPECT_NEAR(step_control_s(in, o), allreduce_s("best", 256, 8, o.link), 1e-18);
  EXPECT_DOUBLE_EQ(step_control_bytes(in, 8), 448);
  // One worker polls nothing over the network.
  const StepResult one = simulate_step(in, {.world_size = 1, .link = o.link});
  EXPECT_EQ(one.control_ms, 0);
  EXPECT_EQ(one.bytes_sent, 0);
  EXPECT_NEAR(one.step_ms, single_worker_step_ms(in), 1e-9);
}

// train_step_input: the train app always polls; BERT's MLM weighs counted targets, GPT-2 not.
TEST(StepControl, TrainStepInputFollowsTheModel) {
  for (const auto& [preset, counts] :
       std::vector<std::pair<std::string, bool>>{{"gpt2-tiny", false}, {"bert-tiny", true}}) {
    const train::TrainConfig c =
        train::parse_train_config(
            "model: {preset: " + preset + ", vocab_size: 256, n_ctx: 64}\ndata: {seq_len: 64}\n",
            "t.yaml", {})
            .value();
    auto layout = build_layout(c).value();
    EXPECT_EQ(layout->weighs_counted_targets, counts) << preset;
    const StepInput in = train_step_input(*layout, {0.01, {0.001}, 0.001, "test"}, {});
    EXPECT_TRUE(in.polls_stop_signals);
    EXPECT_EQ(in.counts_targets, counts) << preset;
    EXPECT_EQ(in.forward_s, 0.01);
  }
}

}  // namespace
}  // namespace sparq::sim
