// Resumes whose state would land on other positions are refused, in one process (one rank);
// Note [Layouts in the checkpoint], checkpointing.cpp. Another comm.dense_patterns or
// comm.min_compress_numel moves tensors in the flat layout (the parameters, optimizer moments
// and residual are flat arrays); another comm.bucket_mb moves the buckets that dgc's momentum
// and two_phase's server residual belong to. Before these checks both resumed without a word
// (or aborted at the first two_phase exchange). A stateless compressor still resumes under
// another bucket plan; another optim.freeze_steps is refused across the freeze. And the first save
// into a new train.checkpoint_dir warns of nothing.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "common/fresh_dir.h"
#include "common/log_capture.h"
#include "core/check.h"
#include "data/shard.h"
#include "resume_checks_fixture.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

namespace fs = std::filesystem;

using sparq::testing::fresh_dir;
using namespace resume_checks;  // resume_checks_fixture.h

TEST(ResumeChecks, AnotherDenseLayoutIsRefused) {
  const std::string root = fresh_dir("dense_patterns");
  // With the patterns the biases and norms sit after the weights; without them, between.
  expect_refused(train_then_resume(root, {}, {"comm.dense_patterns=[]"}),
                 {"the flat parameter layout differs", "comm.dense_patterns",
                  "comm.min_compress_numel", "changed here: comm.dense_patterns"});
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  // Every tensor of fewer than 10000 floats dense: the embeddings' neighbours move too.
  expect_refused(make_trainer(root + "/numel", {"comm.min_compress_numel=10000"}, *self)
                     ->resume(checkpoint_dir(root, 2)),
                 {"the flat parameter layout differs", "changed here: comm.min_compress_numel"});
  // The same settings still resume.
  const Status same = make_trainer(root + "/same", {}, *self)->resume(checkpoint_dir(root, 2));
  EXPECT_TRUE(same.is_ok()) << same.message();
  // A step directory that does not exist (a typo: "step-2" for "step-00000002") is said to be
  // missing, not an interrupted save (review, 2026-12-05).
  // The newest step beside it is named (review, 2026-12-08).
  expect_refused(make_trainer(root + "/typo", {}, *self)->resume(root + "/step-2"),
                 {"checkpoint '" + root +
                  "/step-2' does not exist (the newest complete step "
                  "beside it: " +
                  checkpoint_dir(root, 2) + ")"});
  // With a trailing slash too (self-review, 2026-12-08).
  expect_refused(make_trainer(root + "/typo", {}, *self)->resume(root + "/step-2/"),
                 {"(the newest complete step beside it: " + checkpoint_dir(root, 2) + ")"});
  // Resumed without a checkpoint directory: said as a warning when it trains steps, naming
  // where it could go on saving; not when it trains none (an export, the final evaluation)
  // (review, 2026-12-08).
  for (const int steps : {3, 2}) {
    sparq::testing::LogCapture log;
    auto unsaved = make_trainer(root + "/unsaved",
                                {"train.checkpoint_dir=", "train.checkpoint_interval=0",
                                 "train.steps=" + std::to_string(steps)},
                                *self);
    ASSERT_TRUE(unsaved->resume(checkpoint_dir(root, 2)).is_ok());
    ASSERT_TRUE(unsaved->run().is_ok());
    const bool warned = log.text().find(
                            "train.checkpoint_dir is not set: this run saves no checkpoint "
                            "(--set train.checkpoint_dir=" +
                            root + " goes on saving") != std::string::npos;
    EXPECT_EQ(warned, steps == 3) << log.text();
  }
  // A rank file for its step directory: "cannot list checkpoint directory" (review, 2026-12-08).
  const std::string rank_file = checkpoint_rank_file(checkpoint_dir(root, 2), 0);
  expect_refused(make_trainer(root + "/rank_file", {}, *self)->resume(rank_file),
                 {"checkpoint '" + rank_file +
                  "' is a file: pass the step directory that holds "
                  "it ('" +
                  checkpoint_dir(root, 2) + "')"});
  // A file under a step directory's name exists: it was reported missing (review).
  std::ofstream(root + "/step-00000003") << "not a checkpoint";
  expect_refused(make_trainer(root + "/file", {}, *self)->resume(root + "/step-00000003"),
                 {"checkpoint '" + root + "/step-00000003' is not a directory"});
}

TEST(ResumeChecks, AnotherBucketPlanWithPerBucketStateIsRefused) {
  struct Case {
    std::string name;
    std::vector<std::string> set;
    std::string state;  // the part that holds the per-bucket state
  };
  const Case cases[] = {
      {"dgc", {"compress.name=dgc", "compress.dgc.density=0.1"}, ".compressor"},  // momentum
      {"two_phase",  // the server residual
       {"compress.name=topk", "compress.topk.density=0.1", "compress.aggregation=two_phase"},
       ".aggregator"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string root = fresh_dir("bucket_mb_" + c.name);
    // Still 6 buckets, but buckets 3 and 4 cover other ranges: loaded by index, dgc's momentum
    // went to other positions (zero-filled where short) and two_phase aborted at its first step.
    expect_refused(train_then_resume(root, c.set, {"comm.bucket_mb=0.26"}),
                   {"its bucket plan differs", "changed here: comm.bucket_mb: 0.25 -> 0.26",
                    "comm.first_bucket_mb", "compressor and aggregator state (bucket", c.state});
  }
}

TEST(ResumeChecks, AnotherBucketPlanWithoutPerBucketStateResumes) {
  // topk through allgather keeps nothing per bucket: its residual is flat, any plan fits, also
  // one with more buckets (10 here, 6 saved), whose state names used to be refused.
  const std::string root = fresh_dir("bucket_mb_stateless");
  const Status s = train_then_resume(root, {"compress.name=topk", "compress.topk.density=0.1"},
                                     {"comm.bucket_mb=0.15"});
  EXPECT_TRUE(s.is_ok()) << s.message();
}

// Another aggregation strategy cannot take two_phase's server residual: the refusal names the
// strategy that saved it, not just "tree aggregation: unexpected saved state" (before
// 2026-12-06). Strategies that keep nothing change freely.
TEST(ResumeChecks, AnotherAggregationNamesTheStrategyThatSavedItsState) {
  const std::vector<std::string> topk = {"compress.name=topk", "compress.topk.density=0.1"};
  std::vector<std::string> two_phase = topk;
  two_phase.push_back("compress.aggregation=two_phase");
  const std::string root = fresh_dir("aggregation_changed");
  expect_refused(train_then_resume(root, two_phase, {"compress.aggregation=tree"}),
                 {"bucket", ".aggregator", "saved by the two_phase aggregation",
                  "this run's tree cannot take", "compress.aggregation"});
  const std::string stateless = fresh_dir("aggregation_changed_stateless");
  const Status s = train_then_resume(stateless, topk, {"compress.aggregation=tree"});
  EXPECT_TRUE(s.is_ok()) << s.message();
}

using sparq::testing::LogCapture;

// Found in review (2026-12-05): a resume with another optim.freeze_steps was accepted with an
// info line, though across the freeze it changes what the saved state means (Adam::
// check_resume). Before either freeze it is fine.
TEST(ResumeChecks, AnotherFreezeStepAcrossTheFreezeIsRefused) {
  const std::vector<std::string> momentum = {"optim.communicate=momentum"};
  const auto with_freeze = [&](int f) {
    std::vector<std::string> set = momentum;
    set.push_back(fmt::format("optim.freeze_steps={}", f));
    return set;
  };
  expect_refused(train_then_resume(fresh_dir("froze"), with_freeze(1), {"optim.freeze_steps=3"}),
                 {"optim.freeze_steps is 3 here but 1 in the checkpoint of step 2",
                  "froze at step 1", "resume with optim.freeze_steps: 1"});
  expect_refused(
      train_then_resume(fresh_dir("would_have"), with_freeze(4), {"optim.freeze_steps=1"}),
      {"would have frozen at step 1"});
  EXPECT_TRUE(
      train_then_resume(fresh_dir("later"), with_freeze(4), {"optim.freeze_steps=3"}).is_ok());
  EXPECT_TRUE(train_then_resume(fresh_dir("same"), with_freeze(1), {}).is_ok());
}

// Momentum turned on at a resume starts "as in a fresh run", as its warning says: the first
// momentum is the gradient itself, so with dampening 0.5 the first step equals plain SGD's. It
// was half of it: the buffer started from zeros while the step count went on (review,
// 2026-12-07). And another optimizer starts its count at zero. Sending the update, the local
// momentum counted from step 0 and was half of it too (review, 2026-12-07): it counts from the
// resumed step (Optimizer::local_state_origin).
TEST(ResumeChecks, StateAbsentFromTheCheckpointStartsAsInAFreshRun) {
  for (const std::string communicate : {"gradient", "update"}) {
    SCOPED_TRACE("optim.communicate=" + communicate);
    std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
    const std::string root = fresh_dir("resume_fresh_momentum_" + communicate);
    const std::vector<std::string> sgd = {
        "optim.name=sgd",          "optim.lr=0.1",         "optim.momentum=0",
        "optim.schedule=constant", "optim.warmup_steps=0", "optim.communicate=" + communicate};
    ASSERT_TRUE(make_trainer(root, sgd, *self)->run().is_ok());
    const auto one_step_after_resume = [&](const std::string& dir, std::vector<std::string> set) {
      set.insert(set.end(), {"train.steps=3", "train.checkpoint_interval=0"});
      auto trainer = make_trainer(root + "/" + dir, set, *self);
      EXPECT_TRUE(trainer->resume(checkpoint_dir(root, 2)).is_ok());
      EXPECT_TRUE(trainer->run().is_ok());
      return trainer->param_checksum();
    };
    std::vector<std::string> momentum = sgd;
    momentum.insert(momentum.end(), {"optim.momentum=0.9", "optim.dampening=0.5"});
    EXPECT_EQ(one_step_after_resume("plain", sgd), one_step_after_resume("momentum", momentum))
        << "the first momentum after the resume was not the gradient";
  }
}

// A root whose newest complete step cannot be loaded (a damaged rank file) names the step
// before it: the error named the damaged file only (review, 2026-12-07).
TEST(ResumeChecks, ADamagedNewestStepNamesTheStepBeforeIt) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const std::string root = fresh_dir("resume_damaged_newest");
  ASSERT_TRUE(make_trainer(root, {"train.steps=4"}, *self)->run().is_ok());
  const std::string newest = checkpoint_rank_file(checkpoint_dir(root, 4), 0);
  fs::resize_file(newest, fs::file_size(newest) / 2);
  const Status s = make_trainer(root + "/resumed", {"train.steps=6"}, *self)->resume(root);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(
      s.message().find("; the newest complete step before it: --resume " + checkpoint_dir(root, 2)),
      std::string::npos)
      << s.message();
  // Named by hand, the damaged step is the user's choice: no other step is offered.
  const Status named =
      make_trainer(root + "/resumed", {"train.steps=6"}, *self)->resume(checkpoint_dir(root, 4));
  ASSERT_FALSE(named.is_ok());
  EXPECT_EQ(named.message().find("newest complete step before it"), std::string::npos)
      << named.message();
}

TEST(ResumeChecks, TheFirstSaveIntoANewCheckpointDirWarnsOfNothing) {
  const std::string root = fresh_dir("fresh") + "/new/ckpt";  // neither exists yet
  EXPECT_TRUE(set_aside_checkpoints_from(root, 0).empty());
  LogCapture log;
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  ASSERT_TRUE(make_trainer(root, {}, *self)->run().is_ok());
  EXPECT_TRUE(is_complete(checkpoint_dir(root, 2)));
  EXPECT_NE(log.text().find("checkpoint of step 2 written"), std::string::npos) << log.text();
  EXPECT_EQ(log.text().find("cannot list checkpoint directory"), std::string::npos) << log.text();
}

// What a resume says (the warnings above, "resumed from") is said once every rank agreed to
// resume: a resume refused after the load had begun logged its warnings, then failed (review,
// 2026-12-07).
TEST(ResumeChecks, ARefusedResumeSaysNothingOfWhatItLoaded) {
  const std::string root = fresh_dir("refused_quiet");
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  ASSERT_TRUE(make_trainer(root, {}, *self)->run().is_ok());
  // Damaged after the data check: a counter that is not a number.
  const std::string file = checkpoint_rank_file(checkpoint_dir(root, 2), 0);
  auto f = read_checkpoint_file(file);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  f->meta["nonfinite_in_a_row"] = "x";
  ASSERT_TRUE(write_checkpoint_file(file, *f).is_ok());
  LogCapture log;
  const Status refused =
      make_trainer(root + "/other", {"data.markov.seed=9"}, *self)->resume(checkpoint_dir(root, 2));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("nonfinite_in_a_row"), std::string::npos) << refused.message();
  EXPECT_EQ(log.text().find("the training data differs"), std::string::npos) << log.text();
  EXPECT_EQ(log.text().find("resumed from"), std::string::npos) << log.text();
}

// The checkpoint's model is compared as a model, not as its spec's text (review, 2026-12-07):
// the same model with its keys in another order, a default spelled out, or another dropout
// resumes (the last said with the other changed settings); another n_head, which keeps the
// layout but not the function, is refused by name.
TEST(ResumeChecks, TheSameModelInOtherWordsResumesAndAnotherModelIsRefused) {
  const std::string root = fresh_dir("model_spec");
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  SPARQ_CHECK(make_trainer(root, {}, *self)->run().is_ok(), "training failed");
  const std::string saved_model =
      "model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1}";
  const auto resume_with = [&](const std::string& model, const std::string& sub) {
    std::string text = kResumeChecksConfig;
    text.replace(text.find(saved_model), saved_model.size(), model);
    auto config = parse_train_config(text, "checkpoint_resume_checks_test",
                                     {"train.checkpoint_dir=" + root + "/" + sub, "train.steps=2"});
    SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
    auto trainer = Trainer::create(*config, *self);
    SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
    return (*trainer)->resume(checkpoint_dir(root, 2));
  };
  for (const auto& [model, sub] : std::vector<std::pair<std::string, std::string>>{
           {"model: {preset: gpt2-tiny, n_layer: 1, n_ctx: 16, vocab_size: 64}", "reordered"},
           {"model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1, ln_eps: 1.0e-5, "
            "n_head: 4}",
            "defaults"},
           {"model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1, dropout: 0.1}",
            "dropout"}}) {
    const Status s = resume_with(model, sub);
    EXPECT_TRUE(s.is_ok()) << model << "\n" << s.message();
  }
  expect_refused(
      resume_with("model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1, n_head: 2}",
                  "heads"),
      {"does not match this config: n_head differs: model is 'gpt2-tiny vocab_size=64 n_ctx=16 "
       "n_layer=1' there and 'gpt2-tiny vocab_size=64 n_ctx=16 n_layer=1 n_head=2' here"});
}

// PowerSGD's saved factors hold its rank: another rank is refused, naming the setting as the
// config spells it (the message said "compress.rank", a key that does not exist: review,
// 2026-12-07).
TEST(ResumeChecks, AnotherPowerSgdRankIsRefusedByItsName) {
  const std::string root = fresh_dir("powersgd_rank");
  expect_refused(
      train_then_resume(root, {"compress.name=powersgd", "compress.powersgd.rank=2"},
                        {"compress.powersgd.rank=4"}),
      {"not the", "of rank 4: was the state saved with another compress.powersgd.rank?"});
}

}  // namespace
}  // namespace sparq::train
