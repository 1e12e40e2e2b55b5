// What Trainer::describe() says before a run. Note [A dry run's activations]
// (train/trainer.h): the memory a dry run plans for the
// micro-batch is what the run it checks then reports, for VGG, whose activations have a part
// per image that does not grow with the batch, as for GPT-2. The dry run scaled the one-row
// figure by the batch: VGG at B = 32 planned 170 MiB where the run holds 12 (review,
// 2026-12-08).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

// The "memory:    about X MiB per rank" figure of describe(), in MiB.
double described_mib(const std::string& description) {
  std::smatch m;
  const std::regex memory("memory: +about ([0-9.]+) MiB");
  EXPECT_TRUE(std::regex_search(description, m, memory)) << description;
  return m.empty() ? -1 : std::stod(m[1].str());
}

double memory_mib(const std::string& yaml, const std::vector<std::string>& sets, bool dry_run) {
  auto config = parse_train_config(yaml, "dry_run_memory_test", sets);
  EXPECT_TRUE(config.is_ok()) << config.status().message();
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  Trainer::Options options;
  options.dry_run = dry_run;
  auto trainer = Trainer::create(*config, *self, options);
  EXPECT_TRUE(trainer.is_ok()) << trainer.status().message();
  return trainer.is_ok() ? described_mib((*trainer)->describe()) : -1;
}

TEST(DryRunMemory, PlansTheActivationsTheRunHolds) {
  const std::string vgg =
      "model: {preset: vgg-tiny}\n"
      "data: {source: synthetic_images}\n"
      "optim: {name: sgd, lr: 0.01, momentum: 0.9}\n"
      "train: {steps: 2, micro_batch: 32, eval_batches: 1, eval_interval: 0}\n"
      "log: {progress_interval: 0}\n";
  const std::string gpt2 =
      "model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 2}\n"
      "data: {source: markov, seq_len: 64, markov: {train_tokens: 65536, eval_tokens: 4096}}\n"
      "optim: {name: adamw, lr: 0.001}\n"
      "train: {steps: 2, micro_batch: 16, eval_batches: 1, eval_interval: 0}\n"
      "log: {progress_interval: 0}\n";
  for (const auto& [name, yaml] : {std::pair{"vgg-tiny", vgg}, std::pair{"gpt2-tiny", gpt2}}) {
    SCOPED_TRACE(name);
    const double planned = memory_mib(yaml, {}, true), held = memory_mib(yaml, {}, false);
    ASSERT_GT(held, 0);
    EXPECT_NEAR(planned, held, 0.005 * held)
        << "the dry run planned " << planned << " MiB, the run holds " << held;
  }
}

// The threads per rank, and a note when this node's ranks times threads exceed its cores:
// plain mpirun without OMP_NUM_THREADS gave each rank every core without a word (review,
// 2026-12-08). The launcher's local size is what a 64-rank node would set.
TEST(TrainerDescribe, SaysTheThreadsAndWhenTheRanksOversubscribeTheCores) {
  const std::string yaml =
      "model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 1}\n"
      "data: {source: markov, seq_len: 64, markov: {train_tokens: 65536, eval_tokens: 4096}}\n"
      "train: {steps: 2, micro_batch: 2, eval_batches: 1, eval_interval: 0, threads: 1}\n"
      "log: {progress_interval: 0}\n";
  auto config = parse_train_config(yaml, "describe_test", {});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const std::string alone = Trainer::create(*config, *self).value()->describe();
  EXPECT_NE(alone.find("world:     1 rank(s) x 1 thread(s)"), std::string::npos) << alone;
  EXPECT_EQ(alone.find("take turns"), std::string::npos) << alone;
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "100000", 1);
  const std::string crowded = Trainer::create(*config, *self).value()->describe();
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_NE(crowded.find("note: 100000 rank(s) on this node x 1 thread(s) = 100000 > its"),
            std::string::npos)
      << crowded;
}

}  // namespace
}  // namespace sparq::train
