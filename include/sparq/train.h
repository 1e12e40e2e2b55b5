// Public API: training from a program (docs/embedding.md, "Training in code").
//
//   auto config = sparq::train::default_train_config().value();  // or load_train_config()
//   config.train.steps = 100;
//   config.compress.compress.name = "topk";
//   config.compress.compress.params = {{"density", "0.01"}};
//   auto comm = sparq::train::make_communicator(config.comm).value();  // reuse it across runs
//   sparq::train::RunOptions options;
//   options.trainer.on_step = [](const sparq::train::StepMetrics& m) { ... };
//   auto summary = sparq::train::run_training(config, *comm, options);
//
// or the whole `train` command line, with whatever was registered before it:
//   int main(int argc, char** argv) { register_mine(); return sparq::train::train_main(argc, argv); }
//
// Stable: TrainConfig and its sections' fields, default_train_config, load_train_config,
// parse_train_config, validate_train_config, effective_yaml, make_communicator, run_training,
// RunOptions, Trainer::Options' callbacks, StepMetrics, EvalMetrics, TrainSummary, train_main.
#pragma once

#include "train/metrics.h"
#include "train/run.h"
#include "train/train_config.h"
#include "train/train_main.h"
#include "train/trainer.h"
#include "sparq/version.h"
