// Training as a library call: what apps/train does, for programs that embed sparq
// (include/sparq/train.h is the public header; docs/embedding.md).
//
//   auto config = sparq::train::default_train_config().value();   // or load_train_config()
//   config.train.steps = 50;  ...                                  // edit fields in code
//   config = sparq::train::validate_train_config(config).value();  // the YAML checks
//   auto comm = sparq::train::make_communicator(config.comm).value();
//   RunOptions options;
//   options.trainer.on_step = [](const StepMetrics& m) { ... };
//   auto summary = sparq::train::run_training(config, *comm, options);
//
// Errors: every Status run_training() returns is agreed between the ranks (trainer.h), so it
// is the same text on every rank: print it on one (comm->rank() == 0). The one exception is
// a failed export_safetensors, which only rank 0 (the writer) returns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace sparq::train {

struct RunOptions {
  Trainer::Options trainer;     // dry_run, on_step, on_eval
  std::string resume;           // a checkpoint directory to continue from (Trainer::resume)
  std::int64_t stop_at = -1;    // >= 0: stop after this many steps (Trainer::run)
  std::string export_safetensors;  // after training, rank 0 writes the parameters here
};

// The configuration every key's default gives (what an empty YAML file means).
Result<TrainConfig> default_train_config();

// Validates a configuration built or edited in code with exactly the checks a YAML file gets:
// it is written out with effective_yaml() and read back, so every error names its dotted key
// ("<in-code config>: optim.lr: ..."), derived values (the schedule's total steps) follow the
// fields, and resolved_yaml is filled in. The model is whatever its preset and spec say:
// build it with make_model_config() / parse_model_spec(), not by editing fields of it.
Result<TrainConfig> validate_train_config(const TrainConfig& config);

// The communicator config.backend selects: MPI when it is mpi, or auto under mpirun (MPI is
// initialised here when nobody has yet, and then finalised at process exit: communicators may
// be made one after another, and train_main() called again), else a single-process one;
// wrapped in the emulated slow link when
// comm.emulate is set. argc/argv go to MPI_Init (may be null).
// An MPI communicator made here runs with fixed control settings until the Trainer has agreed
// the ranks' configs (Note [Control settings until the config agrees], comm/communicator.h),
// then with each run's comm.allreduce and comm.mpi_wait. Its backend and emulated link are
// fixed here: a run whose config asks for others is refused, naming both.
Result<std::unique_ptr<comm::Communicator>> make_communicator(const CommConfig& config,
                                                              int* argc = nullptr,
                                                              char*** argv = nullptr);
// Whether this process was started by mpirun (or another MPI launcher).
bool launched_by_mpi();
// The number of processes the MPI launcher started (Open MPI's or PMI's count), 0 if unknown.
int launched_world_size();

// Builds a Trainer for the config on `comm` (validated first when it was edited since it was
// read or validated: its effective_yaml() differs from resolved_yaml), resumes when asked, trains and
// returns the summary. Rank 0 logs the start-up report and the progress lines as `train`
// does; with options.trainer.dry_run it logs the resolved config and the plan and trains
// nothing (a summary of zero steps).
Result<TrainSummary> run_training(const TrainConfig& config, comm::Communicator& comm,
                                  const RunOptions& options = {});

}  // namespace sparq::train
