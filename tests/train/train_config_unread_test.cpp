// TrainConfig: settings that this run never reads (another optimizer's, another model's or
// source's, a schedule's) are accepted, so that a study cell may switch one section, and named
// (unread_settings); an optimizer's range checks apply only to the optimizer that runs.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "train/train_config.h"

namespace sparq::train {
namespace {

// Settings the chosen optimizer never reads were accepted and ignored without a word (audit,
// 2026-12-05): they are accepted (a study cell may switch optim.name) and named.
TEST(TrainConfig, SettingsTheOptimizerNeverReadsAreNamed) {
  const auto unread = [](const std::string& optim) {
    auto c = parse_train_config("optim: " + optim + "\n", "u.yaml", {});
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    return c.is_ok() ? c->optim.unread_settings() : std::vector<std::string>{"not parsed"};
  };
  EXPECT_EQ(unread("{name: adamw, momentum: 0.9}"),
            std::vector<std::string>{"optim.momentum is ignored: only sgd reads it, and this run "
                                     "has name adamw, communicate gradient"});
  EXPECT_EQ(unread("{name: sgd, beta2: 0.99, eps: 1.0e-6}").size(), 2u);
  EXPECT_EQ(unread("{name: adamw, frozen_variance_floor: 0.5}").size(), 1u);
  EXPECT_TRUE(unread("{name: sgd, momentum: 0.9, nesterov: true}").empty());
  EXPECT_TRUE(unread("{name: adamw, beta2: 0.99, momentum: 0}").empty());
  // Nor are another optimizer's range checks applied: an sgd cell of a study whose base
  // config runs adamw with eps 0 was refused, and an adam cell for sgd's nesterov (review,
  // 2026-12-07). The optimizer that runs them still checks them.
  EXPECT_EQ(unread("{name: sgd, eps: 0}").size(), 1u);
  EXPECT_EQ(unread("{name: adamw, nesterov: true}").size(), 1u);
  EXPECT_FALSE(parse_train_config("optim: {name: adamw, eps: 0}\n", "u.yaml", {}).is_ok());
  EXPECT_FALSE(parse_train_config("optim: {name: sgd, nesterov: true}\n", "u.yaml", {}).is_ok());
}

// Outside optim too: keys only another model, source, tracing or plan reads were accepted
// without a word (review, 2026-12-06); they are noted, not refused.
TEST(TrainConfig, SettingsThisRunNeverReadsAreNamed) {
  // The notes of `yaml`: exactly `wanted`, in any order.
  const auto expect_notes = [](const std::string& yaml, const std::vector<std::string>& wanted) {
    auto config = parse_train_config(yaml, "u.yaml", {});
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    std::vector<std::string> notes = unread_settings(*config);
    std::vector<std::string> sorted = wanted;
    std::sort(notes.begin(), notes.end());
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(notes, sorted) << yaml;
  };
  expect_notes(
      "data: {mask_prob: 0.5, augment: false, synthetic: {train_images: 5}}\n"
      "log: {trace_start: 5}\ncomm: {plan_min_compression: 50}\n",
      {"data.mask_prob is ignored: only BERT reads it, and this run has model gpt2-tiny, "
       "data.source markov",
       "data.augment is ignored: only the image sources read it, and this run has model "
       "gpt2-tiny, data.source markov",
       "data.synthetic.train_images is ignored: only data.source synthetic_images reads it, and "
       "this run has model gpt2-tiny, data.source markov",
       "log.trace_start is ignored: only a run with log.trace reads it, and this run has no "
       "log.trace",
       "comm.plan_min_compression is ignored: only comm.plan: auto reads it, and this run has "
       "comm.plan: fixed"});
  // The Markov keys for another source, seq_len for images, keep_checkpoints without a
  // folder, init_format without init_from (review, 2026-12-07).
  expect_notes(
      "model: {preset: vgg-tiny}\ndata: {source: synthetic_images, seq_len: 999, "
      "markov: {order: 3}}\ntrain: {keep_checkpoints: 5, init_format: sparq}\n",
      {"data.seq_len is ignored: only the token sources read it, and this run has model "
       "vgg-tiny, data.source synthetic_images",
       "data.markov.order is ignored: only data.source markov reads it, and this run has model "
       "vgg-tiny, data.source synthetic_images",
       "train.keep_checkpoints is ignored: only a run with train.checkpoint_dir reads it, and "
       "this run has no train.checkpoint_dir",
       "train.init_format is ignored: only a run with train.init_from reads it, and this run "
       "has no train.init_from"});
  // Read by this run: nothing to say.
  auto bert = parse_train_config(
      "model: {preset: bert-tiny}\ndata: {mask_prob: 0.2, seq_len: 64, markov: {vocab_size: 256}, "
      "cls_id: 1, sep_id: 2, mask_id: 3}\nlog: {trace: t.json, trace_start: 2}\n",
      "b.yaml", {});
  ASSERT_TRUE(bert.is_ok()) << bert.status().message();
  EXPECT_TRUE(unread_settings(*bert).empty())
      << fmt::format("{}", fmt::join(unread_settings(*bert), "\n"));
}

// The schedule's settings likewise: min_lr above lr was refused for schedules that never read
// it (a constant run at a lower lr than the base config's min_lr; review, 2026-12-07).
TEST(TrainConfig, SettingsTheScheduleNeverReadsAreNamed) {
  const auto parse = [](const std::string& optim) {
    return parse_train_config("optim: " + optim + "\n", "s.yaml", {});
  };
  auto constant = parse("{schedule: constant, lr: 1.0e-4, min_lr: 2.0e-4, gamma: 0.5}");
  ASSERT_TRUE(constant.is_ok()) << constant.status().message();
  EXPECT_EQ(constant->schedule.unread_settings(),
            (std::vector<std::string>{"optim.min_lr is ignored: only the schedules linear "
                                      "and cosine read it, and this run has schedule constant",
                                      "optim.gamma is ignored: only the schedule step reads it, "
                                      "and this run has schedule constant"}));
  auto step = parse("{schedule: step, lr: 1.0e-4, min_lr: 2.0e-4, step_size: 10, gamma: 0.5}");
  ASSERT_TRUE(step.is_ok()) << step.status().message();
  EXPECT_EQ(step->schedule.unread_settings().size(), 1u);
  const auto cosine = parse("{schedule: cosine, lr: 1.0e-4, min_lr: 2.0e-4}");
  ASSERT_FALSE(cosine.is_ok());
  EXPECT_NE(cosine.status().message().find(
                "optim.min_lr: must be in [0, lr=0.0001] for the cosine schedule"),
            std::string::npos)
      << cosine.status().message();
}

}  // namespace
}  // namespace sparq::train
