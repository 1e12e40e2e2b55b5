#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/ops.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace sparq::optim {
namespace {

TEST(LrSchedule, WarmupThenEachShape) {
  LrScheduleConfig c;
  c.lr = 1.0;
  c.warmup_steps = 4;
  c.total_steps = 14;
  c.min_lr = 0.1;
  c.kind = "constant";
  LrSchedule constant(c);
  EXPECT_DOUBLE_EQ(constant.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(constant.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(constant.lr_at(100), 1.0);

  c.kind = "cosine";
  LrSchedule cosine(c);
  EXPECT_DOUBLE_EQ(cosine.lr_at(4), 1.0);
  EXPECT_NEAR(cosine.lr_at(9), 0.1 + 0.9 * 0.5, 1e-12);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(cosine.lr_at(14), 0.1, 1e-12);
  EXPECT_NEAR(cosine.lr_at(1000), 0.1, 1e-12);  // floor holds after the end
  for (int s = 4; s < 14; ++s) EXPECT_GE(cosine.lr_at(s), cosine.lr_at(s + 1));

  c.kind = "linear";
  LrSchedule linear(c);
  EXPECT_NEAR(linear.lr_at(9), 0.55, 1e-12);
  EXPECT_NEAR(linear.lr_at(20), 0.1, 1e-12);

  c.kind = "step";
  c.step_size = 3;
  c.gamma = 0.5;
  LrSchedule step(c);
  EXPECT_DOUBLE_EQ(step.lr_at(4), 1.0);
  EXPECT_DOUBLE_EQ(step.lr_at(6), 1.0);
  EXPECT_DOUBLE_EQ(step.lr_at(7), 0.5);
  EXPECT_DOUBLE_EQ(step.lr_at(10), 0.25);
}

TEST(LrSchedule, ValidationNamesTheKey) {
  LrScheduleConfig c;
  c.kind = "exponential";
  EXPECT_NE(c.validate().message().find("optim.schedule"), std::string::npos);
  c = LrScheduleConfig{};
  c.kind = "cosine";
  c.total_steps = 0;
  EXPECT_NE(c.validate().message().find("optim.total_steps"), std::string::npos);
  c = LrScheduleConfig{};
  c.lr = -1;
  EXPECT_NE(c.validate().message().find("optim.lr: must be >= 0, got -1"), std::string::npos);
  c.lr = 0;  // the config reader's range too (it refused here: review, 2026-12-07)
  EXPECT_TRUE(c.validate().is_ok());
  c.kind = "cosine";
  c.total_steps = 10;
  EXPECT_TRUE(c.validate().is_ok());
  c = LrScheduleConfig{};
  c.kind = "cosine";
  c.total_steps = 10;
  c.min_lr = 1.0;
  EXPECT_NE(c.validate().message().find("optim.min_lr"), std::string::npos);
  c.kind = "constant";  // reads no min_lr: noted, not refused
  EXPECT_TRUE(c.validate().is_ok());
  EXPECT_EQ(c.unread_settings().size(), 1u);
  EXPECT_TRUE(LrScheduleConfig{}.validate().is_ok());
}

// Plain SGD has no momentum buffer to dampen: a dampening set there was read by no one and
// said nothing (review, 2026-12-07).
TEST(OptimConfig, DampeningWithoutMomentumIsSaidToBeIgnored) {
  OptimConfig c;
  c.name = "sgd";
  c.dampening = 0.5;
  const std::vector<std::string> notes = c.unread_settings("optim.");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("optim.dampening is ignored: only sgd with momentum > 0 reads it, and "
                          "this run has name sgd, momentum 0"),
            std::string::npos)
      << notes[0];
  c.momentum = 0.9;
  EXPECT_TRUE(c.unread_settings("optim.").empty());
}

TEST(ClipGradNorm, ScalesToMaxNormLikePyTorch) {
  ParamStore s;
  s.add({"a", {3}, Init::zeros(), true});
  s.add({"b", {2}, Init::zeros(), true});
  s.allocate();
  float* a = s.grad("a").data<float>();
  float* b = s.grad("b").data<float>();
  a[0] = 3; a[1] = 0; a[2] = 0; b[0] = 0; b[1] = 4;  // norm 5
  EXPECT_DOUBLE_EQ(clip_grad_norm(s, 0.0), 5.0);  // measure only
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(s, 10.0), 5.0);  // below the bound: untouched
  EXPECT_EQ(b[1], 4.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(s, 1.0), 5.0);
  EXPECT_NEAR(a[0], 3.0 / (5.0 + 1e-6), 1e-7);
  EXPECT_NEAR(b[1], 4.0 / (5.0 + 1e-6), 1e-7);
  EXPECT_NEAR(std::sqrt(ops::sum_squares(s.grads(), s.flat_numel())), 1.0, 1e-6);
}

}  // namespace
}  // namespace sparq::optim
