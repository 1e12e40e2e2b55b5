// Learning-rate schedules as pure functions of the step (0-based: the step about to be
// taken), so resuming from a checkpoint needs nothing but the step counter.
//
// Every schedule starts with an optional linear warm-up from lr/warmup_steps to lr over
// `warmup_steps` steps (step s < warmup uses lr * (s + 1) / warmup), then:
//   constant: lr
//   step:     lr * gamma^floor((s - warmup) / step_size)
//   linear:   linear decay from lr to min_lr at total_steps, min_lr after
//   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * progress)) / 2, progress in [0, 1]
//             over [warmup, total_steps], min_lr after
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace sparq::optim {

struct LrScheduleConfig {
  std::string kind = "constant";  // constant | step | linear | cosine
  double lr = 1e-3;
  std::int64_t warmup_steps = 0;
  // linear/cosine: where the decay reaches min_lr. In a TrainConfig it is derived, not set:
  // train.steps (the config reader and the trainer set it).
  std::int64_t total_steps = 0;
  double min_lr = 0.0;            // floor for linear/cosine
  std::int64_t step_size = 1000;  // step: decay interval
  double gamma = 0.1;             // step: decay factor

  // Checks ranges; the message names the offending key (e.g. "optim.gamma").
  Status validate(const std::string& prefix = "optim.") const;
  // The settings this schedule never reads that differ from their defaults, one note each
  // (as OptimConfig::unread_settings: said, not refused).
  std::vector<std::string> unread_settings(const std::string& prefix = "optim.") const;
};

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleConfig config) : config_(std::move(config)) {}
  double lr_at(std::int64_t step) const;
  const LrScheduleConfig& config() const { return config_; }

 private:
  LrScheduleConfig config_;
};

}  // namespace sparq::optim
