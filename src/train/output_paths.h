// Note [Outputs never overwrite inputs]: what a run writes (log.metrics, log.trace, the
// export) must name no file the run reads (the config file, data.train and data.eval, a
// CIFAR-10 folder's files, train.init_from) and no other of its outputs. A metrics path that
// named the training shard truncated it at start-up (the run then died of SIGBUS), one that
// named the config or the initial weights replaced them with JSONL records, and an export
// over data.train left a shard that no longer loaded: each without a word (review,
// 2026-12-07). Checked on rank 0, which writes them, before anything is opened.
#pragma once

#include <string>

#include "core/status.h"
#include "train/train_config.h"

namespace sparq::train {

// An error naming both keys when an output of the run is one of its inputs or another of its
// outputs (the same file by path, by a symbolic link or by a hard link). Outputs that are
// streams (standard output, a pipe, a descriptor) are written in place, and never compared.
// `export_path`: --export-safetensors (RunOptions::export_safetensors), empty for none.
Status check_outputs_spare_inputs(const TrainConfig& config, const std::string& export_path);

}  // namespace sparq::train
