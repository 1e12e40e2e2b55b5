// The readers of the config's top-level sections (train/train_config.cpp, parse_train_config,
// calls them in order): each reads its own section's keys (train, model, data, optim,
// compress, comm, log) into the TrainConfig, with the checks between them. Internal.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "train/train_config.h"
#include "train/yaml_reader.h"

namespace sparq::train::config_sections {

// The most steps any step count may name (train.steps, warm-ups): 2^40.
inline constexpr std::int64_t kMaxSteps = std::int64_t{1} << 40;

Status read_loop(YamlReader& r, TrainConfig& c);  // train.*: first (the schedule needs steps)
Status read_model(YamlReader& r, TrainConfig& c);
Status read_data(YamlReader& r, TrainConfig& c);
Status read_optim(YamlReader& r, TrainConfig& c);
Status read_compress(YamlReader& r, TrainConfig& c);
Status read_comm(YamlReader& r, TrainConfig& c);
Status read_log(YamlReader& r, TrainConfig& c);

}  // namespace sparq::train::config_sections
