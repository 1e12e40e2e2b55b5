// The fixture of the one-process resume checks (checkpoint_resume_checks_test.cpp,
// checkpoint_resume_data_test.cpp): a small GPT-2 trained 2 steps into a checkpoint, then
// resumed under other settings.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "core/check.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train::resume_checks {

// GPT-2 tiny with one layer: about 200k floats in several buckets of at most 64k floats.
inline constexpr char kResumeChecksConfig[] = R"(
model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1}
data: {source: markov, seq_len: 16, markov: {vocab_size: 64, train_tokens: 8192, eval_tokens: 1024}}
optim: {name: adamw, lr: 1.0e-3}
comm: {first_bucket_mb: 0.1, bucket_mb: 0.25, dense_patterns: ["*.bias", "*ln_*"]}
train: {micro_batch: 2, eval_batches: 1, eval_interval: 0, checkpoint_interval: 2, seed: 5}
log: {progress_interval: 0}
)";

inline std::unique_ptr<Trainer> make_trainer(const std::string& root,
                                             const std::vector<std::string>& set,
                                             comm::Communicator& self) {
  std::vector<std::string> overrides = {"train.checkpoint_dir=" + root, "train.steps=2"};
  overrides.insert(overrides.end(), set.begin(), set.end());
  auto config = parse_train_config(kResumeChecksConfig, "checkpoint_resume_checks_test", overrides);
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  auto trainer = Trainer::create(*config, self);
  SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
  return std::move(trainer).value();
}

// Trains 2 steps with `set` into `root` (checkpoint step 2), then resumes that checkpoint with
// `set` and `changed`: the resume's status.
inline Status train_then_resume(const std::string& root, const std::vector<std::string>& set,
                                const std::vector<std::string>& changed) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  auto trained = make_trainer(root, set, *self)->run();
  SPARQ_CHECK(trained.is_ok(), "{}", trained.status().message());
  SPARQ_CHECK(is_complete(checkpoint_dir(root, 2)), "no checkpoint of step 2 in {}", root);
  std::vector<std::string> resume_set = set;
  resume_set.insert(resume_set.end(), changed.begin(), changed.end());
  return make_trainer(root + "/resumed", resume_set, *self)->resume(checkpoint_dir(root, 2));
}

inline void expect_refused(const Status& s, const std::vector<std::string>& phrases) {
  ASSERT_FALSE(s.is_ok()) << "the resume was accepted";
  for (const std::string& phrase : phrases) {
    EXPECT_NE(s.message().find(phrase), std::string::npos) << phrase << "\n" << s.message();
  }
}

}  // namespace sparq::train::resume_checks
