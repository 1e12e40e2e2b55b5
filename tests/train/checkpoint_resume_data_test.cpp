// Resumes on other data, another seed or row length, fewer items than the saved position, the
// same shard by another path, and a checkpoint from before the position was saved: where the
// data continues, and what is said or refused (docs/reliability.md, "Data position"). In one
// process (one rank), with the fixture of checkpoint_resume_checks_test.cpp.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/fresh_dir.h"
#include "common/log_capture.h"
#include "data/shard.h"
#include "resume_checks_fixture.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

namespace fs = std::filesystem;

using namespace resume_checks;
using sparq::testing::fresh_dir;
using sparq::testing::LogCapture;

TEST(ResumeChecks, ResumingOnOtherDataIsSaid) {
  // The saved data position counts items of the checkpoint's data; on other data (here
  // another Markov chain) it continues in other items: allowed, and now said (review).
  const std::string root = fresh_dir("other_data");
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  ASSERT_TRUE(make_trainer(root, {}, *self)->run().is_ok());
  {
    LogCapture log;
    ASSERT_TRUE(make_trainer(root + "/same", {}, *self)->resume(checkpoint_dir(root, 2)).is_ok());
    EXPECT_EQ(log.text().find("the training data differs"), std::string::npos) << log.text();
  }
  LogCapture log;
  const Status other =
      make_trainer(root + "/other", {"data.markov.seed=9"}, *self)->resume(checkpoint_dir(root, 2));
  ASSERT_TRUE(other.is_ok()) << other.message();
  EXPECT_NE(log.text().find("resume: the training data differs from the checkpoint's"),
            std::string::npos)
      << log.text();
}

// Another train.seed was refused by the loader in its own words ("loader state was saved with
// seed 5, but this loader uses seed 6"), naming no setting; rows of another data.seq_len were
// refused as "past the end" or continued in other items without a word (review, 2026-12-07).
TEST(ResumeChecks, AnotherSeedIsNamedAndAnotherRowLengthIsSaid) {
  const std::string root = fresh_dir("seed_rows");
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  ASSERT_TRUE(make_trainer(root, {}, *self)->run().is_ok());
  expect_refused(
      make_trainer(root + "/seed", {"train.seed=6"}, *self)->resume(checkpoint_dir(root, 2)),
      {"the checkpoint's run has train.seed 5, this one 6", "resume with --set train.seed=5"});
  LogCapture log;
  const Status rows =
      make_trainer(root + "/rows", {"data.seq_len=8"}, *self)->resume(checkpoint_dir(root, 2));
  ASSERT_TRUE(rows.is_ok()) << rows.message();
  EXPECT_NE(log.text().find("resume: data.seq_len is 8 here, 16 in the checkpoint: rows of "
                            "another length are other items: the data position (item 4 of "
                            "epoch 0) continues in other items"),
            std::string::npos)
      << log.text();
}

// Other data with fewer items than the saved position was refused ("position 4 is past the 3
// items of an epoch"), where docs/config.md promised a warning; and another Markov training
// token count was not other data at all (review, 2026-12-07). Now the epoch ends there and the
// next starts at item 0, said; the same data at a position past its end is still refused.
TEST(ResumeChecks, ResumingOnFewerItemsThanThePositionStartsTheNextEpoch) {
  const std::string root = fresh_dir("fewer_items");
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  ASSERT_TRUE(make_trainer(root, {}, *self)->run().is_ok());  // position 4 (2 steps of 2)
  {
    LogCapture log;
    const Status fewer = make_trainer(root + "/fewer", {"data.markov.train_tokens=52"}, *self)
                             ->resume(checkpoint_dir(root, 2));
    ASSERT_TRUE(fewer.is_ok()) << fewer.message();
    EXPECT_NE(log.text().find("8192 training tokens; now: "), std::string::npos) << log.text();
    EXPECT_NE(log.text().find("52 training tokens): the data position (item 4 of epoch 0) is "
                              "past the end of the new data's epoch, which ends there: epoch 1 "
                              "starts at item 0"),
              std::string::npos)
        << log.text();
  }
  {
    LogCapture log;
    const Status more = make_trainer(root + "/more", {"data.markov.train_tokens=9000"}, *self)
                            ->resume(checkpoint_dir(root, 2));
    ASSERT_TRUE(more.is_ok()) << more.message();
    EXPECT_NE(log.text().find("(item 4 of epoch 0) continues in other items"), std::string::npos)
        << log.text();
  }
  // The same data, at a position past its end: a damaged checkpoint.
  const std::string file = checkpoint_rank_file(checkpoint_dir(root, 2), 0);
  auto f = read_checkpoint_file(file);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  f->meta["loader.position"] = "100000";
  ASSERT_TRUE(write_checkpoint_file(file, *f).is_ok());
  const Status damaged =
      make_trainer(root + "/damaged", {}, *self)->resume(checkpoint_dir(root, 2));
  ASSERT_FALSE(damaged.is_ok());
  EXPECT_NE(damaged.message().find("position 100000 is past the"), std::string::npos)
      << damaged.message();
}

// A checkpoint from before loader.position was saved counts its step in global batches of the
// run that wrote it: with another train.micro_batch the resume continued at step x the new
// batch (review, 2026-12-07); it continues at step x the checkpoint's.
TEST(ResumeChecks, APositionlessCheckpointCountsItsOwnMicroBatch) {
  const std::string root = fresh_dir("positionless");
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  ASSERT_TRUE(make_trainer(root, {}, *self)->run().is_ok());  // position 4 (2 steps of 2)
  const std::string file = checkpoint_rank_file(checkpoint_dir(root, 2), 0);
  auto f = read_checkpoint_file(file);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ(f->meta.erase("loader.position"), 1u);
  ASSERT_TRUE(write_checkpoint_file(file, *f).is_ok());
  auto resumed = make_trainer(root + "/resumed", {"train.micro_batch=4"}, *self);
  ASSERT_TRUE(resumed->resume(checkpoint_dir(root, 2)).is_ok());
  ASSERT_TRUE(resumed->save_checkpoint().is_ok());
  auto saved = read_checkpoint_file(checkpoint_rank_file(checkpoint_dir(root + "/resumed", 2), 0));
  ASSERT_TRUE(saved.is_ok()) << saved.status().message();
  EXPECT_EQ(saved->meta_or("loader.position", ""), "4");
}

// A shard is its contents, not the path that names it: a resume from another working
// directory (another relative path to the same file) was warned of as other data (review,
// 2026-12-07). A shard regenerated at the same path, with other tokens, is other data.
TEST(ResumeChecks, TheSameShardByAnotherPathIsTheSameData) {
  const std::string root = fresh_dir("shard_path");
  const auto write = [](const std::string& path, std::uint32_t stride) {
    std::vector<std::uint32_t> tokens(8192);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<std::uint32_t>(i * stride % 61 + 1);
    }
    SPARQ_CHECK(data::write_shard(path, "gpt2", 64, tokens, 1).is_ok(), "cannot write {}", path);
  };
  fs::create_directories(root + "/data");
  write(root + "/data/train.bin", 7);
  write(root + "/data/eval.bin", 5);
  const auto on_shard = [&](const std::string& dir) {
    return std::vector<std::string>{"data.source=shard", "data.train=" + dir + "/train.bin",
                                    "data.eval=" + dir + "/eval.bin"};
  };
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  ASSERT_TRUE(make_trainer(root, on_shard(root + "/data"), *self)->run().is_ok());
  {
    LogCapture log;
    const Status same = make_trainer(root + "/same", on_shard(root + "/data/../data"), *self)
                            ->resume(checkpoint_dir(root, 2));
    ASSERT_TRUE(same.is_ok()) << same.message();
    EXPECT_EQ(log.text().find("the training data differs"), std::string::npos) << log.text();
  }
  write(root + "/data/train.bin", 11);
  LogCapture log;
  const Status other = make_trainer(root + "/other", on_shard(root + "/data"), *self)
                           ->resume(checkpoint_dir(root, 2));
  ASSERT_TRUE(other.is_ok()) << other.message();
  EXPECT_NE(log.text().find("resume: the training data differs from the checkpoint's"),
            std::string::npos)
      << log.text();
}

}  // namespace
}  // namespace sparq::train
