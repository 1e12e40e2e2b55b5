#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "optim/unread_setting.h"

namespace sparq::optim {

Status LrScheduleConfig::validate(const std::string& prefix) const {
  if (kind != "constant" && kind != "step" && kind != "linear" && kind != "cosine") {
    return Status::error("{}schedule: '{}' is not one of constant, step, linear, cosine", prefix,
                         kind);
  }
  // 0 is a rate (the parameters stay as they are, as in PyTorch): the config reader took it
  // and this refused it, each saying another range (review, 2026-12-07).
  if (!(lr >= 0.0) || !std::isfinite(lr)) {
    return Status::error("{}lr: must be >= 0, got {}", prefix, lr);
  }
  if (warmup_steps < 0) return Status::error("{}warmup_steps: must be >= 0, got {}", prefix, warmup_steps);
  if (min_lr < 0.0) return Status::error("{}min_lr: must be >= 0, got {}", prefix, min_lr);
  // Only the decays read min_lr: a constant or step run given a lower lr than a base config's
  // min_lr was refused (review, 2026-12-07); unread_settings() says it is ignored instead.
  if ((kind == "linear" || kind == "cosine") && min_lr > lr) {
    return Status::error("{}min_lr: must be in [0, lr={}] for the {} schedule, got {}", prefix, lr,
                         kind, min_lr);
  }
  if ((kind == "linear" || kind == "cosine") && total_steps <= warmup_steps) {
    return Status::error("{}total_steps: the {} schedule needs total_steps > warmup_steps ({}), got {}",
                         prefix, kind, warmup_steps, total_steps);
  }
  if (kind == "step" && step_size <= 0) {
    return Status::error("{}step_size: must be > 0, got {}", prefix, step_size);
  }
  if (kind == "step" && !(gamma > 0.0 && gamma <= 1.0)) {
    return Status::error("{}gamma: must be in (0, 1], got {}", prefix, gamma);
  }
  return Status::ok();
}

std::vector<std::string> LrScheduleConfig::unread_settings(const std::string& prefix) const {
  const LrScheduleConfig defaults;
  const bool decays = kind == "linear" || kind == "cosine";
  return unread_notes(
      {
          {"min_lr", min_lr != defaults.min_lr, decays, "the schedules linear and cosine read it"},
          {"step_size", step_size != defaults.step_size, kind == "step",
           "the schedule step reads it"},
          {"gamma", gamma != defaults.gamma, kind == "step", "the schedule step reads it"},
      },
      prefix, "schedule " + kind);
}

double LrSchedule::lr_at(std::int64_t step) const {
  const LrScheduleConfig& c = config_;
  if (step < c.warmup_steps) {
    return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  }
  const std::int64_t after = step - c.warmup_steps;
  if (c.kind == "step") return c.lr * std::pow(c.gamma, static_cast<double>(after / c.step_size));
  if (c.kind == "linear" || c.kind == "cosine") {
    const double span = static_cast<double>(c.total_steps - c.warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(after) / span);
    const double shape = c.kind == "linear"
                             ? 1.0 - progress
                             : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    return c.min_lr + (c.lr - c.min_lr) * shape;
  }
  return c.lr;
}

}  // namespace sparq::optim
