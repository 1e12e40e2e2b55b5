// Every rank resumes the same checkpoint step or none does (Trainer::resume): ranks that
// resolve a checkpoint root on their own could otherwise continue from different steps (a
// shared file system whose listings lag) as silently diverged replicas. Here the ranks are
// handed different step directories of one run, which is what such a listing looks like. And
// a save that sets another history's step aside lets rank 0 move it before any rank writes.
// And a one-rank checkpoint resumes on two ranks under comm.split_tied_embedding: always.
// And rank files of another rank, or whose parameters or replicated optimizer state differ from
// rank 0's, are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "core/check.h"
#include "core/file_io.h"
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

// Each rank loads its own file, so nothing compared what they loaded (review, 2026-12-07):
// rank files swapped by hand resumed each rank with the other's residual and optimizer state,
// and a rank file whose parameters differ but whose checksums hold (checksum64 misses two sign
// flips; here a value changed and the file rewritten) resumed diverged replicas.
TEST(ResumeAgreementMpi, RankFilesOfAnotherRankOrWithOtherParametersAreRefused) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& comm = **world;
  const std::string root = ::testing::TempDir() + "/resume_rank_files_mpi";
  if (comm.rank() == 0) std::filesystem::remove_all(root);
  comm.barrier();
  ASSERT_TRUE(make_trainer(root, comm)->run().is_ok());
  const std::string step = checkpoint_dir(root, 2);
  const std::string file0 = checkpoint_rank_file(step, 0), file1 = checkpoint_rank_file(step, 1);
  const auto edit = [&](const std::function<void()>& change) {
    comm.barrier();
    if (comm.rank() == 0) change();
    comm.barrier();
  };
  // Swapped: each rank's file is the other's.
  edit([&] {
    std::filesystem::rename(file0, step + "/tmp");
    std::filesystem::rename(file1, file0);
    std::filesystem::rename(step + "/tmp", file1);
  });
  const Status swapped = make_trainer(root + "/swapped", comm)->resume(step);
  ASSERT_FALSE(swapped.is_ok()) << "swapped rank files were resumed";
  EXPECT_NE(swapped.message().find("written by rank 1, but it is rank 0's file"), std::string::npos)
      << swapped.message();
  edit([&] {
    std::filesystem::rename(file0, step + "/tmp");
    std::filesystem::rename(file1, file0);
    std::filesystem::rename(step + "/tmp", file1);
  });
  ASSERT_TRUE(make_trainer(root + "/restored", comm)->resume(step).is_ok());
  // Rank 1's parameters changed in one value, its checksums written anew.
  edit([&] {
    auto f = read_checkpoint_file(file1);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    for (auto& [name, bytes] : f->sections) {
      if (name == "params") bytes[3] = static_cast<char>(bytes[3] ^ 0x80);  // a sign flip
    }
    ASSERT_TRUE(write_checkpoint_file(file1, *f).is_ok());
  });
  const Status diverged = make_trainer(root + "/diverged", comm)->resume(step);
  ASSERT_FALSE(diverged.is_ok()) << "ranks resumed other parameters";
  EXPECT_NE(diverged.message().find("rank 1 loaded other parameters than rank 0"),
            std::string::npos)
      << diverged.message();
  // The parameters put back, Adam's first moment changed instead: replicated on every rank in
  // the gradient mode, it was resumed as it was, and the replicas' parameters parted at the
  // next step (review, 2026-12-08).
  edit([&] {
    auto f = read_checkpoint_file(file1);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    for (auto& [name, bytes] : f->sections) {
      if (name == "params") bytes[3] = static_cast<char>(bytes[3] ^ 0x80);  // back
      if (name == "optim/adamw.exp_avg") bytes[3] = static_cast<char>(bytes[3] ^ 0x80);
    }
    ASSERT_TRUE(write_checkpoint_file(file1, *f).is_ok());
  });
  const Status moments = make_trainer(root + "/moments", comm)->resume(step);
  ASSERT_FALSE(moments.is_ok()) << "ranks resumed other optimizer moments";
  EXPECT_NE(moments.message().find(
                "rank 1 loaded other optimizer state (optim/adamw.exp_avg) than rank 0"),
            std::string::npos)
      << moments.message();
}

// Found in review (2026-12-05): rank 0 set another history's steps aside while the other ranks
// already wrote their files of the first save into the step directory being moved (about one
// trial in five overwrote that history's step in place, or left its set-aside copy without
// COMPLETE). Now every rank waits for the set-aside. A resumes nothing: it trains steps 1..4;
// B resumes A's step 2 with another lr and saves its own step 4 at the same number.
TEST(ResumeAgreementMpi, AnotherHistorysStepIsSetAsideWholeBeforeAnyRankWrites) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& comm = **world;
  const auto trainer = [&](const std::string& root, const std::vector<std::string>& set) {
    std::vector<std::string> overrides = {"train.checkpoint_dir=" + root, "train.steps=4",
                                          "train.checkpoint_interval=2"};
    overrides.insert(overrides.end(), set.begin(), set.end());
    auto config = parse_train_config(kConfig, "resume_agreement_mpi_test", overrides);
    SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
    auto t = Trainer::create(*config, comm);
    SPARQ_CHECK(t.is_ok(), "{}", t.status().message());
    return std::move(t).value();
  };
  for (int trial = 0; trial < 4; ++trial) {
    const std::string root = ::testing::TempDir() + "/set_aside_mpi";
    if (comm.rank() == 0) std::filesystem::remove_all(root);
    comm.barrier();
    ASSERT_TRUE(trainer(root, {})->run().is_ok());
    const std::string a4 = checkpoint_dir(root, 4);
    const std::string a4_file = *read_file(checkpoint_rank_file(a4, comm.rank()));
    comm.barrier();
    auto b = trainer(root, {"optim.lr=3.0e-3"});
    ASSERT_TRUE(b->resume(checkpoint_dir(root, 2)).is_ok());
    ASSERT_TRUE(b->run().is_ok());
    comm.barrier();
    ASSERT_TRUE(is_complete(a4 + ".superseded")) << "trial " << trial;
    EXPECT_TRUE(*read_file(checkpoint_rank_file(a4 + ".superseded", comm.rank())) == a4_file)
        << "trial " << trial << ": A's step 4 was overwritten";
    EXPECT_TRUE(is_complete(a4));
    EXPECT_TRUE(*read_file(checkpoint_rank_file(a4, comm.rank())) != a4_file) << "trial " << trial;
  }
}

// Found in review (2026-12-06): a 1 -> 2 elastic resume with comm.split_tied_embedding: always
// was refused ("always, but a single rank exchanges nothing"): the resume rebuilt the old
// world's bucket plan from this config for one rank, although the file records its buckets.
// Now only a file without them has it rebuilt, and an old world of one rank is unsplit.
TEST(ResumeAgreementMpi, OneRankCheckpointResumesOnTwoUnderSplitAlways) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& comm = **world;
  const auto trainer = [](const std::string& root, comm::Communicator& c, bool always) {
    const std::string split = always ? "always" : "auto";
    auto config =
        parse_train_config(kConfig, "resume_agreement_mpi_test",
                           {"train.checkpoint_dir=" + root, "comm.split_tied_embedding=" + split});
    SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
    auto t = Trainer::create(*config, c);
    SPARQ_CHECK(t.is_ok(), "{}", t.status().message());
    return std::move(t).value();
  };
  const std::string root = ::testing::TempDir() + "/split_always_mpi";
  const std::string step2 = checkpoint_dir(root, 2);
  if (comm.rank() == 0) {  // the one-rank run (no split on one rank)
    std::filesystem::remove_all(root);
    std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
    const auto trained = trainer(root, *self, false)->run();
    SPARQ_CHECK(trained.is_ok(), "{}", trained.status().message());
  }
  comm.barrier();
  const Status recorded = trainer(root + "/two", comm, true)->resume(step2);
  EXPECT_TRUE(recorded.is_ok()) << recorded.message();

  // A file from before the buckets were recorded: its plan is rebuilt, unsplit for one rank.
  comm.barrier();
  if (comm.rank() == 0) {
    auto f = read_checkpoint_file(checkpoint_rank_file(step2, 0));
    SPARQ_CHECK(f.is_ok(), "{}", f.status().message());
    f->meta.erase("buckets");
    f->meta.erase("aggregations");
    SPARQ_CHECK(write_checkpoint_file(checkpoint_rank_file(step2, 0), *f).is_ok(), "rewrite");
  }
  comm.barrier();
  const Status rebuilt = trainer(root + "/rebuilt", comm, true)->resume(step2);
  EXPECT_TRUE(rebuilt.is_ok()) << rebuilt.message();
}

}  // namespace
}  // namespace sparq::train
