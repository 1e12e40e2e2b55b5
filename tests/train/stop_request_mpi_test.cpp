// Trainer::Options::stop_requested returns 0 or a signal number 1..63. Another value stopped a
// one-rank run and was dropped by the poll of several ranks, which then never stopped (review,
// 2026-12-07): it is refused the same way at every world size, on every rank.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

TrainConfig tiny_markov_config(const std::vector<std::string>& sets = {}) {
  auto config = parse_train_config(
      "model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 1}\n"
      "data: {source: markov, seq_len: 32, markov: {train_tokens: 4096, eval_tokens: 256}}\n"
      "optim: {name: sgd, lr: 0.01}\ncompress: {name: none}\n"
      "train: {steps: 4, micro_batch: 2, eval_batches: 1, eval_interval: 0}\n"
      "log: {progress_interval: 0}\n",
      "x.yaml", sets);
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

// Note [An evaluation a stop skipped]: a run stopped before an evaluating step's evaluation
// saves it as pending; a resume stopped at once keeps it pending and does not run it (it ran
// it, stopped before any step, saved nothing, and the next resume ran it again: two records
// of one evaluation; review, 2026-12-07). A resume left alone then runs it, once.
TEST(StopRequest, AResumeStoppedAtOnceLeavesThePendingEvaluationPending) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& c = **world;
  const std::string dir =
      ::testing::TempDir() + "/sparq_pending_eval_np" + std::to_string(c.size());
  if (c.rank() == 0) std::filesystem::remove_all(dir);
  c.barrier();
  const TrainConfig config = tiny_markov_config(
      {"train.eval_interval=2", "train.checkpoint_interval=2", "train.checkpoint_dir=" + dir});
  // The step boundary's poll before step 2 says no; the one before step 2's evaluation, yes.
  std::vector<std::int64_t> evaluated;
  int polls = 0;
  Trainer::Options first;
  first.stop_requested = [&] { return ++polls == 3 ? SIGUSR1 : 0; };
  first.on_eval = [&](const EvalMetrics& e) { evaluated.push_back(e.step); };
  auto stopped = Trainer::create(config, c, first).value()->run();
  ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
  ASSERT_EQ(stopped->steps, 2);
  EXPECT_TRUE(evaluated.empty());
  Trainer::Options at_once = first;
  at_once.stop_requested = [] { return SIGUSR1; };
  auto again = Trainer::create(config, c, at_once).value();
  ASSERT_TRUE(again->resume(dir).is_ok());
  auto resumed = again->run();
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  EXPECT_EQ(resumed->stop_signal, SIGUSR1);
  EXPECT_TRUE(evaluated.empty()) << "the pending evaluation ran before a stop asked at once";
  Trainer::Options left_alone = first;
  left_alone.stop_requested = [] { return 0; };
  auto last = Trainer::create(config, c, left_alone).value();
  ASSERT_TRUE(last->resume(dir).is_ok());
  ASSERT_TRUE(last->run().is_ok());
  // Step 2's, once, then the final one at step 4.
  EXPECT_EQ(evaluated, (std::vector<std::int64_t>{2, 4}));
}

// Note [A stop before the final evaluation]: a stop asked during the last step skips the final
// evaluation and ends the run as stopped (it ran the evaluation and ended as trained, with
// status 0: review, 2026-12-07); the final checkpoint is saved, and a resume from it runs the
// evaluation, once.
TEST(StopRequest, AStopDuringTheLastStepSkipsTheFinalEvaluation) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& c = **world;
  const std::string dir =
      ::testing::TempDir() + "/sparq_final_eval_stop_np" + std::to_string(c.size());
  if (c.rank() == 0) std::filesystem::remove_all(dir);
  c.barrier();
  const TrainConfig config = tiny_markov_config({"train.checkpoint_dir=" + dir});
  std::vector<std::int64_t> evaluated;
  int polls = 0;
  Trainer::Options first;
  // Polls 1-4 come before steps 1-4; the fifth, after the last step, before its evaluation.
  first.stop_requested = [&] { return ++polls == 5 ? SIGUSR1 : 0; };
  first.on_eval = [&](const EvalMetrics& e) { evaluated.push_back(e.step); };
  auto stopped = Trainer::create(config, c, first).value()->run();
  ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
  EXPECT_EQ(stopped->steps, 4);
  EXPECT_EQ(stopped->stop_signal, SIGUSR1);
  EXPECT_TRUE(stopped->stopped_early);
  EXPECT_EQ(stopped->saved_step, 4);
  EXPECT_TRUE(evaluated.empty()) << "the final evaluation ran after the stop";
  Trainer::Options left_alone = first;
  left_alone.stop_requested = [] { return 0; };
  auto last = Trainer::create(config, c, left_alone).value();
  ASSERT_TRUE(last->resume(dir).is_ok());
  auto resumed = last->run();
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  EXPECT_EQ(resumed->steps_run, 0);
  EXPECT_EQ(resumed->stop_signal, 0);
  EXPECT_EQ(evaluated, (std::vector<std::int64_t>{4}));
  // Without a checkpoint directory nothing could resume it: the final evaluation runs, the
  // run's only result (self-review, 2026-12-08).
  evaluated.clear();
  polls = 0;
  auto unsaved = Trainer::create(tiny_markov_config(), c, first).value()->run();
  ASSERT_TRUE(unsaved.is_ok()) << unsaved.status().message();
  EXPECT_EQ(unsaved->stop_signal, 0);
  EXPECT_EQ(evaluated, (std::vector<std::int64_t>{4}));
}

}  // namespace
}  // namespace sparq::train
