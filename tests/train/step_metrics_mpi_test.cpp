// A step's communication metrics count the blocking control collectives outside the buckets
// (review, 2026-12-07): the stop-signal poll the train app runs before every step (one 64-slot
// int32 allreduce) and BERT's count of masked targets before the forward (one int64). They
// were left out of exposed_comm_ms and bytes_sent, while step_ms held BERT's count and left
// out the poll, which on a slow link costs a latency per step. Their bytes are what the ring
// moved on this rank, as the communicator counts them: the trainer's own figure (the payload,
// sent and received) was short on three ranks and more (review, 2026-12-07).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/byte_model.h"
#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

// What the buckets (and the tied-rows tail) sent or received: the rest is control traffic.
std::uint64_t bucket_bytes(const comm::StepCommStats& s, bool received = false) {
  const auto of = [received](const comm::BucketTiming& b) {
    return received ? b.bytes.received : b.bytes.sent;
  };
  std::uint64_t sum = s.tail ? of(*s.tail) : 0;
  for (const comm::BucketTiming& b : s.buckets) sum += of(b);
  return sum;
}

TEST(StepMetricsMpi, ControlCollectivesAreCountedInTheStep) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& c = **world;
  const std::string common =
      "data: {source: markov, seq_len: 32, markov: {train_tokens: 4096, eval_tokens: 256}}\n"
      "optim: {name: sgd, lr: 0.01}\ncompress: {name: none}\n"
      "train: {steps: 2, micro_batch: 2, eval_batches: 1, eval_interval: 0}\n"
      "log: {progress_interval: 0}\n";
  // Every allreduce is counted by the ring model, whichever algorithm ran (comm/byte_model.h).
  const comm::WireBytes poll = comm::ring_allreduce_bytes(64, 4, c.rank(), c.size());
  const comm::WireBytes count = comm::ring_allreduce_bytes(1, 8, c.rank(), c.size());
  const comm::WireBytes both{poll.sent + count.sent, poll.received + count.received};
  for (const auto& [model, control] :
       {std::pair{"model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 1}\n", poll},
        std::pair{"model: {preset: bert-tiny, vocab_size: 256, n_ctx: 64}\n", both}}) {
    SCOPED_TRACE(model);
    auto config = parse_train_config(std::string(model) + common, "x.yaml", {});
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    std::vector<StepMetrics> steps;
    Trainer::Options options;
    options.on_step = [&](const StepMetrics& m) { steps.push_back(m); };
    options.stop_requested = [] { return 0; };  // polled every step, as by the train app
    auto trainer = Trainer::create(*config, c, options);
    ASSERT_TRUE(trainer.is_ok()) << trainer.status().message();
    ASSERT_TRUE((*trainer)->run().is_ok());
    ASSERT_EQ(steps.size(), 2u);
    for (const StepMetrics& m : steps) {
      const comm::StepCommStats& s = m.result.comm;
      EXPECT_EQ(s.bytes_sent - bucket_bytes(s), control.sent) << "step " << m.step();
      EXPECT_EQ(s.bytes_received - bucket_bytes(s, true), control.received) << "step " << m.step();
      EXPECT_GE(s.exposed_ms, 0.0);
      EXPECT_LE(s.exposed_ms, m.result.step_ms);
    }
  }
}

}  // namespace
}  // namespace sparq::train
