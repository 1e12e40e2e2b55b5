// Checkpoints of two histories in one train.checkpoint_dir, in one process (one rank):
// a run resumed from an earlier step sets aside the later steps of the run it branched from,
// so that --resume of the directory and train.keep_checkpoints see its own steps; a run
// resumed from its final checkpoint leaves that checkpoint as it is; a step set aside resumes
// when named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/fresh_dir.h"
#include "core/file_io.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

namespace fs = std::filesystem;

using sparq::testing::fresh_dir;

TEST(CheckpointDirs, SetAsideMovesCompleteStepsFromTheSavedOne) {
  const std::string root = fresh_dir("set_aside");
  for (const std::int64_t step : {2, 4, 6, 8}) fs::create_directories(checkpoint_dir(root, step));
  for (const std::int64_t step : {2, 4, 6})
    ASSERT_TRUE(mark_complete(checkpoint_dir(root, step)).is_ok());
  fs::create_directories(checkpoint_dir(root, 6) + ".superseded");  // an earlier set-aside
  const std::vector<std::string> messages = set_aside_checkpoints_from(root, 5);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("step-00000006"), std::string::npos) << messages[0];
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4)));
  EXPECT_FALSE(fs::exists(checkpoint_dir(root, 6)));
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 6) + ".superseded.2"));  // the first free name
  EXPECT_TRUE(fs::exists(checkpoint_dir(root, 8)));  // incomplete: not another history's state
  EXPECT_EQ(*parse_step(*latest_checkpoint(root)), 4);
  EXPECT_TRUE(set_aside_checkpoints_from(root, 5).empty());
  // The step a save would write is another history's too, unless the run came from it.
  EXPECT_TRUE(set_aside_checkpoints_from(root, 4, checkpoint_dir(root, 4)).empty());
  EXPECT_EQ(set_aside_checkpoints_from(root, 4).size(), 1u);
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4) + ".superseded"));
}

// A run resumed from outside the root's own step directories (a step set aside, another
// root) owns none of the root's steps: retention deleted the lower ones as its own (review,
// 2026-12-07), so they are set aside too.
TEST(CheckpointDirs, AResumeFromElsewhereSetsAsideEveryStepOfTheRoot) {
  const std::string root = fresh_dir("set_aside_elsewhere");
  const std::string other = fresh_dir("set_aside_elsewhere_other");
  for (const std::int64_t step : {2, 4}) {
    fs::create_directories(checkpoint_dir(root, step));
    ASSERT_TRUE(mark_complete(checkpoint_dir(root, step)).is_ok());
  }
  fs::create_directories(checkpoint_dir(other, 6));
  ASSERT_TRUE(mark_complete(checkpoint_dir(other, 6)).is_ok());
  EXPECT_EQ(set_aside_checkpoints_from(root, 6, checkpoint_dir(other, 6)).size(), 2u);
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 2) + ".superseded"));
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4) + ".superseded"));
  EXPECT_TRUE(is_complete(checkpoint_dir(other, 6)));  // the directory resumed from: untouched
  // Resumed from a step set aside in the root itself.
  for (const std::int64_t step : {2, 4}) {
    fs::create_directories(checkpoint_dir(root, step));
    ASSERT_TRUE(mark_complete(checkpoint_dir(root, step)).is_ok());
  }
  EXPECT_EQ(set_aside_checkpoints_from(root, 4, checkpoint_dir(root, 4) + ".superseded").size(),
            2u);
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4) + ".superseded"));  // not moved
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4) + ".superseded.2"));
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 2) + ".superseded.2"));
  // Resumed from a step of the root (with a trailing slash, through "/.", or through a link
  // to it): the steps below are its own.
  for (const std::int64_t step : {2, 4}) {
    fs::create_directories(checkpoint_dir(root, step));
    ASSERT_TRUE(mark_complete(checkpoint_dir(root, step)).is_ok());
  }
  fs::create_directory_symlink("step-00000004", root + "/latest");
  for (const std::string& from :
       {checkpoint_dir(root, 4) + "/", checkpoint_dir(root, 4) + "/.", root + "/latest"}) {
    EXPECT_TRUE(set_aside_checkpoints_from(root, 4, from).empty()) << from;
    EXPECT_TRUE(is_complete(checkpoint_dir(root, 2))) << from;
  }
}

constexpr char kHistoryConfig[] = R"(
model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1}
data: {source: markov, seq_len: 16, markov: {vocab_size: 64, train_tokens: 8192, eval_tokens: 1024}}
optim: {name: adamw, lr: 1.0e-3}
train: {micro_batch: 2, eval_batches: 1, checkpoint_interval: 2, keep_checkpoints: 2, seed: 5}
log: {progress_interval: 0}
)";

Result<TrainSummary> train(const std::string& root, std::int64_t steps, const std::string& resume,
                           std::vector<std::string> overrides = {}) {
  overrides.push_back("train.checkpoint_dir=" + root);
  overrides.push_back("train.steps=" + std::to_string(steps));
  auto config = parse_train_config(kHistoryConfig, "checkpoint_history_test", overrides);
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  auto trainer = Trainer::create(*config, *self);
  SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
  if (!resume.empty()) SPARQ_RETURN_IF_ERROR((*trainer)->resume(resume));
  return (*trainer)->run();
}

TEST(CheckpointHistory, AResumeFromAnEarlierStepSetsAsideTheLaterSteps) {
  const std::string root = fresh_dir("branch");
  ASSERT_TRUE(train(root, 6, "").is_ok());  // steps 4 and 6 kept (keep_checkpoints 2)
  ASSERT_TRUE(is_complete(checkpoint_dir(root, 6)));
  // Branch from step 4 and stop at 5: saves step 5 only.
  ASSERT_TRUE(train(root, 5, checkpoint_dir(root, 4)).is_ok());
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 6) + ".superseded"));
  EXPECT_FALSE(fs::exists(checkpoint_dir(root, 6)));
  // The directory resumes this history, and retention kept its steps 4 and 5.
  EXPECT_EQ(*parse_step(*latest_checkpoint(root)), 5);
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4)));
}

// A fresh start in a used checkpoint_dir sets aside the earlier run's steps, and their step
// records in log.metrics with them: the file was truncated, so the steps set aside could be
// resumed without their history (review, 2026-12-06).
TEST(CheckpointHistory, AFreshStartSetsAsideTheMetricsOfTheStepsItSetsAside) {
  const std::string root = fresh_dir("fresh_metrics");
  const std::string metrics = root + "/metrics.jsonl";
  ASSERT_TRUE(train(root, 4, "", {"log.metrics=" + metrics}).is_ok());
  const std::string first = *read_file(metrics);
  ASSERT_NE(first.find("\"step\":4"), std::string::npos);
  ASSERT_TRUE(train(root, 2, "", {"log.metrics=" + metrics}).is_ok());
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4) + ".superseded"));
  auto kept = read_file(metrics + ".superseded");
  ASSERT_TRUE(kept.is_ok()) << kept.status().message();
  EXPECT_EQ(*kept, first);
  EXPECT_EQ(read_file(metrics)->find("\"step\":4"), std::string::npos);
  // A fresh start that never saves (stopped at step 1, before any checkpoint) still sets
  // both aside: the metrics alone were moved and the steps left, so a --resume of the root
  // continued the old history without its records (self-review, 2026-12-06).
  ASSERT_TRUE(train(root, 4, "", {"log.metrics=" + metrics}).is_ok());  // steps 2, 4 again
  auto config = parse_train_config(
      kHistoryConfig, "checkpoint_history_test",
      {"train.checkpoint_dir=" + root, "train.steps=4", "log.metrics=" + metrics});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  auto self = comm::make_self_communicator();
  auto unsaved = Trainer::create(*config, *self);
  ASSERT_TRUE(unsaved.is_ok()) << unsaved.status().message();
  ASSERT_TRUE((*unsaved)->run(/*stop_at=*/1).is_ok());
  EXPECT_FALSE(latest_checkpoint(root).is_ok());       // no step of the old history in place
  EXPECT_TRUE(fs::exists(metrics + ".superseded.3"));  // run 3's records, set aside by run 4
  // log.metrics through a symbolic link: the file it names is set aside and the link kept
  // (the link was moved, or, skipped, its file truncated: self-reviews, 2026-12-06).
  const std::string real = root + "/real.jsonl", link = root + "/link.jsonl";
  ASSERT_TRUE(write_file_atomic(real, "{\"step\":9}\n").is_ok());
  fs::create_symlink(real, link);
  ASSERT_TRUE(train(root, 2, "").is_ok());  // a complete step to set aside
  ASSERT_TRUE(train(root, 2, "", {"log.metrics=" + link}).is_ok());
  EXPECT_TRUE(fs::is_symlink(link));
  auto linked = read_file(real + ".superseded");
  ASSERT_TRUE(linked.is_ok()) << linked.status().message();
  EXPECT_EQ(*linked, "{\"step\":9}\n");
  EXPECT_NE(read_file(real)->find("\"step\":2"), std::string::npos);
  // Without checkpoints to set aside a fresh run overwrites its metrics as before.
  const std::string plain = fresh_dir("fresh_metrics_plain") + "/m.jsonl";
  ASSERT_TRUE(write_file_atomic(plain, "{\"old\":1}\n").is_ok());
  EXPECT_TRUE(set_aside_metrics(plain, fresh_dir("fresh_metrics_empty_root")).empty());
  EXPECT_TRUE(fs::exists(plain));
  EXPECT_FALSE(fs::exists(plain + ".superseded"));
}

// The history set aside can be taken up again by naming its directory: it resumes bit for
// bit (the checksum of an uninterrupted run), and its later saves set aside nothing of the
// branch, whose steps are all earlier.
TEST(CheckpointHistory, ASetAsideStepResumesByItsName) {
  const std::string root = fresh_dir("back");
  ASSERT_TRUE(train(root, 6, "").is_ok());
  ASSERT_TRUE(train(root, 5, checkpoint_dir(root, 4)).is_ok());
  const std::string set_aside = checkpoint_dir(root, 6) + ".superseded";
  ASSERT_TRUE(is_complete(set_aside));
  EXPECT_EQ(*resolve_checkpoint_dir(set_aside), set_aside);
  auto resumed = train(root, 8, set_aside);
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  EXPECT_EQ(resumed->steps_run, 2);
  auto straight = train(fresh_dir("back_straight"), 8, "");
  ASSERT_TRUE(straight.is_ok());
  EXPECT_EQ(resumed->param_checksum, straight->param_checksum);
  EXPECT_EQ(*parse_step(*latest_checkpoint(root)), 8);
  // A directory that is neither complete nor a root holding one is still refused.
  fs::create_directories(root + "/empty.superseded");
  EXPECT_FALSE(resolve_checkpoint_dir(root + "/empty.superseded").is_ok());
}

TEST(CheckpointHistory, AResumeFromTheFinalStepLeavesItsCheckpointAsItIs) {
  const std::string root = fresh_dir("final");
  auto first = train(root, 4, "");
  ASSERT_TRUE(first.is_ok());
  const std::string rank_file = checkpoint_rank_file(checkpoint_dir(root, 4), 0);
  const auto written = fs::last_write_time(rank_file);
  const auto marked =
      fs::last_write_time(checkpoint_dir(root, 4) + "/" + kCheckpointCompleteMarker);
  auto again = train(root, 4, root);  // nothing to train: evaluates the final state again
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->steps_run, 0);
  EXPECT_EQ(again->param_checksum, first->param_checksum);
  EXPECT_EQ(fs::last_write_time(rank_file), written);
  EXPECT_EQ(fs::last_write_time(checkpoint_dir(root, 4) + "/" + kCheckpointCompleteMarker), marked);
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 4)));
}

// Found in review (2026-12-05): evaluating a step set aside (no step run) set aside the
// directory's own later steps and overwrote its step of the same number with a copy; going on
// from it overwrote the other history's next save in place. Now the evaluation writes nothing,
// and a save moves the step it would replace.
TEST(CheckpointHistory, ASetAsideStepTakenUpAgainMovesButNeverOverwritesTheOtherHistory) {
  const std::string root = fresh_dir("two_histories");
  const std::vector<std::string> b_lr = {"optim.lr=3.0e-3"};           // B: another history
  ASSERT_TRUE(train(root, 6, "").is_ok());                             // A: steps 4 and 6
  ASSERT_TRUE(train(root, 5, checkpoint_dir(root, 4), b_lr).is_ok());  // B sets aside A's 6
  ASSERT_TRUE(train(root, 8, root, b_lr).is_ok());                     // B: steps 6 and 8
  const std::string a6 = checkpoint_dir(root, 6) + ".superseded";
  ASSERT_TRUE(is_complete(a6));
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  };
  // The rank file's bytes, hashed (a failure prints the hash, not megabytes).
  const auto bytes = [](const std::string& dir) {
    return std::hash<std::string>{}(*read_file(checkpoint_rank_file(dir, 0)));
  };
  const std::vector<std::string> before = listing();
  const std::size_t b6 = bytes(checkpoint_dir(root, 6));
  const std::size_t b8 = bytes(checkpoint_dir(root, 8));

  auto evaluated = train(root, 6, a6);  // A's step 6 evaluated: nothing run, nothing written
  ASSERT_TRUE(evaluated.is_ok()) << evaluated.status().message();
  EXPECT_EQ(evaluated->steps_run, 0);
  EXPECT_EQ(listing(), before);
  EXPECT_EQ(bytes(checkpoint_dir(root, 6)), b6);
  EXPECT_EQ(bytes(checkpoint_dir(root, 8)), b8);

  auto resumed = train(root, 8, a6);  // A goes on to 8: B's step 8 is moved, not overwritten
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  EXPECT_EQ(resumed->steps_run, 2);
  ASSERT_TRUE(is_complete(checkpoint_dir(root, 8) + ".superseded"));
  // B's step 6, below A's first save, is B's too: set aside as well, where it stayed in the
  // root for retention to remove as A's (review, 2026-12-05).
  EXPECT_FALSE(fs::exists(checkpoint_dir(root, 6)));
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 6) + ".superseded.2"));
  EXPECT_EQ(bytes(checkpoint_dir(root, 6) + ".superseded.2"), b6);
  EXPECT_EQ(bytes(checkpoint_dir(root, 8) + ".superseded"), b8);
  EXPECT_NE(bytes(checkpoint_dir(root, 8)), b8);
  auto straight = train(fresh_dir("two_histories_straight"), 8, "");
  ASSERT_TRUE(straight.is_ok());
  EXPECT_EQ(resumed->param_checksum, straight->param_checksum);
}

// A checkpoint folder that exists but takes no files was found at the first save, after the
// whole run with the default interval (review, 2026-12-07): now before the first step. Made
// read-only with chattr +i (which binds root too) or, without it, by its mode for others.
TEST(CheckpointHistory, AnUnwritableCheckpointFolderIsRefusedBeforeTheFirstStep) {
  const std::string root = fresh_dir("unwritable");
  ASSERT_TRUE(train(root, 2, "").is_ok());  // step 2 saved, then the folder made read-only
  struct Unlock {
    std::string dir;
    bool immutable = false;
    ~Unlock() {
      if (immutable) (void)std::system(("chattr -i '" + dir + "' 2>/dev/null").c_str());
      fs::permissions(dir, fs::perms::owner_all);
    }
  } unlock{root};
  unlock.immutable = std::system(("chattr +i '" + root + "' 2>/dev/null").c_str()) == 0;
  if (!unlock.immutable) {
    if (::geteuid() == 0) GTEST_SKIP() << "root, and chattr +i is not available here";
    fs::permissions(root, fs::perms::owner_read | fs::perms::owner_exec);
  }
  // Evaluating its last step again saves nothing there: not refused (review, 2026-12-07).
  auto evaluated = train(root, 2, root);
  ASSERT_TRUE(evaluated.is_ok()) << evaluated.status().message();
  EXPECT_EQ(evaluated->steps_run, 0);
  // Going on from it would save: refused before the first step.
  const auto run = train(root, 4, root, {"train.checkpoint_interval=0"});
  ASSERT_FALSE(run.is_ok());
  EXPECT_NE(run.status().message().find("train.checkpoint_dir: a step folder"), std::string::npos)
      << run.status().message();
}

// Found in review: integer metadata went through std::stoll, which read "4abc" as 4 and
// skipped blanks. A damaged value is refused naming the key.
TEST(CheckpointHistory, IntegerMetadataMustBeWhollyAnInteger) {
  const std::string root = fresh_dir("meta_int");
  ASSERT_TRUE(train(root, 2, "").is_ok());
  const std::string file = checkpoint_rank_file(checkpoint_dir(root, 2), 0);
  for (const char* bad : {"5abc", " 5", "", "0x5"}) {
    auto f = read_checkpoint_file(file);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    f->meta["loader.seed"] = bad;
    ASSERT_TRUE(write_checkpoint_file(file, *f).is_ok());
    const auto resumed = train(root, 4, checkpoint_dir(root, 2));
    ASSERT_FALSE(resumed.is_ok()) << "'" << bad << "' accepted";
    EXPECT_NE(resumed.status().message().find("metadata 'loader.seed' is not an integer: '" +
                                              std::string(bad) + "'"),
              std::string::npos)
        << resumed.status().message();
  }
}

}  // namespace
}  // namespace sparq::train
