// Trainer::Options::stop_requested returns 0 or a signal number 1..63. Another value stopped a
// one-rank run and was dropped by the poll of several ranks, which then never stopped (review,
// 2026-12-07): it is refused the same way at every world size, on every rank.
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

TrainConfig tiny_markov_config() {
  auto config = parse_train_config(
      "model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 1}\n"
      "data: {source: markov, seq_len: 32, markov: {train_tokens: 4096, eval_tokens: 256}}\n"
      "optim: {name: sgd, lr: 0.01}\ncompress: {name: none}\n"
      "train: {steps: 4, micro_batch: 2, eval_batches: 1, eval_interval: 0}\n"
      "log: {progress_interval: 0}\n",
      "x.yaml", {});
  EXPECT_TRUE(config.is_ok()) << config.status().message();
  return *config;
}

// Runs 4 steps where the LAST rank's stop_requested returns `value` from step 2 on (0 before,
// and 0 on the other ranks).
Result<TrainSummary> run_with_last_rank_returning(comm::Communicator& c, int value) {
  int polls = 0;
  Trainer::Options options;
  options.stop_requested = [&] {
    ++polls;
    return c.rank() == c.size() - 1 && polls > 2 ? value : 0;
  };
  auto trainer = Trainer::create(tiny_markov_config(), c, options);
  if (!trainer.is_ok()) return trainer.status();
  return (*trainer)->run();
}

TEST(StopRequest, ASignalNumberStopsEveryRankAfterTheSameStep) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  auto summary = run_with_last_rank_returning(**world, SIGUSR1);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->stop_signal, SIGUSR1);
  EXPECT_EQ(summary->steps, 2);
}

TEST(StopRequest, AValueThatIsNotASignalNumberIsRefusedOnEveryRank) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  for (int value : {64, 100, -1}) {
    auto summary = run_with_last_rank_returning(**world, value);
    ASSERT_FALSE(summary.is_ok()) << value << ": the run went on";
    EXPECT_NE(summary.status().message().find(
                  "trainer.stop_requested must return 0 or a signal number 1..63"),
              std::string::npos)
        << summary.status().message();
  }
}

}  // namespace
}  // namespace sparq::train
