// Every rank resumes the same checkpoint step or none does (Trainer::resume): ranks that
// resolve a checkpoint root on their own could otherwise continue from different steps (a
// shared file system whose listings lag) as silently diverged replicas. Here the ranks are
// handed different step directories of one run, which is what such a listing looks like.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "core/check.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

constexpr char kConfig[] = R"(
model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1}
data: {source: markov, seq_len: 16, markov: {vocab_size: 64, train_tokens: 8192, eval_tokens: 1024}}
optim: {name: adamw, lr: 1.0e-3}
train: {steps: 2, micro_batch: 2, eval_batches: 1, eval_interval: 0, checkpoint_interval: 1,
        seed: 5}
log: {progress_interval: 0}
)";

std::unique_ptr<Trainer> make_trainer(const std::string& root, comm::Communicator& comm) {
  auto config =
      parse_train_config(kConfig, "resume_agreement_mpi_test", {"train.checkpoint_dir=" + root});
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  auto trainer = Trainer::create(*config, comm);
  SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
  return std::move(trainer).value();
}

TEST(ResumeAgreementMpi, RanksThatFindDifferentStepsAreRefusedTogether) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& comm = **world;
  // One directory for all ranks (they share this machine's file system); rank 0 clears it.
  const std::string root = ::testing::TempDir() + "/resume_agreement_mpi";
  if (comm.rank() == 0) std::filesystem::remove_all(root);
  comm.barrier();
  auto trained = make_trainer(root, comm)->run();
  ASSERT_TRUE(trained.is_ok()) << trained.status().message();
  ASSERT_TRUE(is_complete(checkpoint_dir(root, 1)));
  ASSERT_TRUE(is_complete(checkpoint_dir(root, 2)));

  // Rank 0 sees step 2 as the newest, the others step 1.
  const std::string mine = checkpoint_dir(root, comm.rank() == 0 ? 2 : 1);
  const Status split = make_trainer(root + "/split", comm)->resume(mine);
  ASSERT_FALSE(split.is_ok()) << "ranks resumed different steps";
  EXPECT_NE(split.message().find("rank 0 found step 2 and rank 1 step 1"), std::string::npos)
      << split.message();
  // The same step on every rank resumes.
  const Status same = make_trainer(root + "/same", comm)->resume(checkpoint_dir(root, 2));
  EXPECT_TRUE(same.is_ok()) << same.message();
}

}  // namespace
}  // namespace sparq::train
