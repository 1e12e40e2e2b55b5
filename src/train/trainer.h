// Trainer: the training loop behind apps/train (DESIGN.md, "Trainer"). Built from a
// validated TrainConfig on a communicator (Self for one process, MPI under mpirun), it owns
// the model, the param store, data, optimizer, bucket plan, gradient exchange, comm engine,
// WFBP scheduler and data-parallel stepper, and runs
//
//   for each step: micro-batches -> DataParallelStepper::step -> metrics (progress line and
//   JSONL on rank 0) -> periodic checkpoint -> periodic evaluation (saved first: a run
//   ended during a long evaluation keeps its step, whose evaluation its resume skips)
//
// Non-finite loss or gradient: the step is skipped (every rank sees the same aggregated
// norm, so every rank skips it) and counted; after train.max_nonfinite_in_a_row skipped
// steps in a row the run fails with a message.
//
// Checkpoints (checkpointing.cpp): per rank, parameters, optimizer state, error-feedback
// residual and compressor state, model state, loader position, counters and the config;
// resume() continues bit-identically with the same world size; with another one it merges
// the per-rank state (elastic_resume.h).
//
// Ownership: borrows the communicator, which must outlive the trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/bucket_plan.h"
#include "comm/comm_engine.h"
#include "comm/wfbp_scheduler.h"
#include "compress/gradient_exchange.h"
#include "core/trace.h"
#include "models/model.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/batch_source.h"
#include "train/batch_staging.h"
#include "train/checkpoint_layout.h"
#include "train/data_parallel.h"
#include "train/metrics.h"
#include "train/rank_device.h"
#include "train/train_config.h"

namespace sparq::train {

struct CheckpointFile;  // train/checkpoint.h

struct TrainSummary {
  std::int64_t steps = 0;        // steps completed in total
  std::int64_t steps_run = 0;    // in this invocation
  std::int64_t skipped = 0;      // skipped steps in total
  std::int64_t skipped_run = 0;  // of them, in this invocation
  double last_loss = 0;          // mean training loss of the last 10% of this run's steps
  EvalMetrics eval;              // the final evaluation (count 0, loss NaN: none ran)
  double items_per_s = 0;        // mean over this run
  double bytes_per_step = 0;     // this rank, on the wire
  double compression_ratio = 1;  // dense f32 bytes / payload bytes
  double seconds = 0;
  std::uint64_t param_checksum = 0;
  bool stopped_early = false;    // --stop-at, or a stop signal
  std::int64_t saved_step = -1;  // the newest step this invocation saved (-1: none)
  int stop_signal = 0;           // the signal that stopped the run (Options::stop_requested)
  DataInfo data;                 // what was trained on (entropy rate, unit)
  // A dry run (Options::dry_run through run_training()): what `train --dry-run` prints, the
  // resolved config, the trainer's description and the verdict; empty otherwise. The library
  // prints nothing itself: the caller shows it (it used to go to stdout unasked and a dry
  // run's summary was that of a run of 0 steps: review, 2026-12-07).
  std::string dry_run_report;
};

// comm.plan: auto's answer (Trainer::Options::plan_buckets).
struct BucketChoice {
  std::vector<std::string> choice;  // one per plan bucket: "", "dense" or a strategy
  std::vector<std::string> report;  // why, one line per compressed bucket
};

// Errors: every Status a Trainer method returns is agreed (agree() below): the same on every
// rank and already naming the ranks that failed, so apps print rank 0's copy only.
class Trainer {
 public:
  struct Options {
    // --dry-run: data files that do not exist yet are reported in describe() instead of
    // failing (a config can be checked before its data is downloaded), and activations are
    // allocated for one row and scaled to the micro-batch in the memory estimate (they are
    // linear in it), so checking a 124M-parameter config does not touch gigabytes.
    bool dry_run = false;
    // Called on every rank after each training step with this rank's metrics (result.loss is
    // the mean over this rank's micro-batches, StepResult::loss; skipped steps are reported too,
    // with result.skipped), and after each evaluation with the all-rank result. For programs that
    // embed the trainer (include/sparq/train.h); a callback must not call into the trainer, and
    // what it does between steps is not overlapped with anything.
    std::function<void(const StepMetrics&)> on_step;
    std::function<void(const EvalMetrics&)> on_eval;
    // comm.plan: auto: the per-bucket choices for `plan` at `world_size` ranks
    // (GradientExchangeConfig::bucket_choice) and the lines explaining them for the start-up
    // log. run_training() sets it to the step simulator's planner (sim/auto_plan.h); a
    // Trainer created without one refuses comm.plan: auto. It must not communicate: the
    // trainer checks afterwards that every rank chose the same.
    std::function<Result<BucketChoice>(const TrainConfig&, const comm::BucketPlan& plan,
                                       int world_size)>
        plan_buckets;
    // The caller resumes a checkpoint next (run_training() sets it for --resume): every
    // parameter comes from the checkpoint, so train.init_from is not read. It was, and a
    // resume failed once the pretrained file had moved (review, 2026-12-06).
    bool resuming = false;
    // Polled on every rank at each step boundary of run(): a non-zero value (a signal number,
    // 1..63) asks the run to stop. The ranks agree (Note [Stopping on a signal],
    // train/stop_signals.h) and all stop after the same step; run() then saves a checkpoint
    // when train.checkpoint_dir is set (no final evaluation) and returns a summary with
    // stop_signal set. Any other non-zero value fails the run with an error naming it, on
    // every rank. Unset: run() never polls and adds no collective. Set it on every rank or on
    // none: the poll is a collective.
    std::function<int()> stop_requested;
  };
  static Result<std::unique_ptr<Trainer>> create(const TrainConfig& config,
                                                 comm::Communicator& comm, Options options);
  static Result<std::unique_ptr<Trainer>> create(const TrainConfig& config,
                                                 comm::Communicator& comm) {
    return create(config, comm, Options{});
  }
  ~Trainer();

  // Start-up report: model, data, parameter layout summary, bucket plan, memory estimate.
  std::string describe() const;
  // Loads a checkpoint directory (a step-* directory or a root holding them: the newest
  // complete one). Another world size is an elastic resume (elastic_resume.h); another layout
  // or a damaged file is refused.
  Status resume(const std::string& path);
  // Trains until train.steps, or until stop_at steps when stop_at >= 0 (an interruption at
  // that step, without a final evaluation or checkpoint; for tests and exports); a stop_at
  // below the current step is an error.
  Result<TrainSummary> run(std::int64_t stop_at = -1);
  EvalMetrics evaluate();
  // evaluate(), then logs it, writes its record and calls Options::on_eval.
  EvalMetrics evaluate_and_report();
  // One training step outside run() (benchmarks drive the loop themselves): no logging,
  // evaluation or checkpoint. The safety checks of run() hold, and end the job when broken:
  // the optimizer's readiness (a variance frozen from skipped warm-up steps divides by eps)
  // and train.max_nonfinite_in_a_row; train_step() had neither (review, 2026-12-07).
  StepMetrics train_step();
  // Writes a checkpoint of the current step to train.checkpoint_dir.
  Status save_checkpoint();

  std::int64_t step() const { return step_; }
  const ParamStore& store() const { return store_; }
  // The parameters on the host: the store itself on the CPU, a refreshed host copy with the
  // same layout when training on a GPU (for export and checksums; synchronous).
  const ParamStore& host_params();
  const ExecContext& context() const { return context_ ? *context_ : ExecContext::cpu(); }
  std::uint64_t param_checksum();
  // The model's state tensors (BatchNorm's running statistics; empty for the transformers), on
  // the model's device: after an evaluation or a checkpoint, rank 0's on every rank (Note
  // [Model state follows rank 0], trainer_weights.cpp).
  std::vector<StateTensor> model_state() const { return model_->state(); }
  const DataInfo& data_info() const { return data_info_; }
  bool is_root() const { return comm_.rank() == 0; }

 private:
  Trainer(const TrainConfig& config, comm::Communicator& comm);
  Status build(const Options& options);
  // Collective, after every rank built: the queue the buckets go through (the control engine,
  // or NCCL's for several GPUs), the WFBP scheduler on it and the stepper.
  Status connect_buckets();
  // check_only: validates the file against the model from its header, copies nothing.
  Status load_initial_weights(bool check_only);
  // After the data is open: Hugging Face GPT-2 weights index GPT-2 BPE ids; a shard of
  // another text tokenizer's ids would feed their rows unrelated tokens.
  Status check_initial_weights_fit_data() const;
  // What load_checkpoint has to say, said by rank 0 once every rank agreed to resume.
  struct ResumeMessages {
    std::vector<std::string> warnings, info;
    AbsentResidualLines absent_residual;  // said by resume() after the fold
    bool server_residual_folded = false;  // by the elastic merge into the residual
  };
  Status load_checkpoint(const std::string& dir, ResumeMessages& messages);  // a step directory
  // load_checkpoint's data position: the loader's state from `f` (written by a world of
  // `world` ranks), checked against this run's seed, data and rows (data_position_resume.cpp).
  Status restore_data_position(const CheckpointFile& f, const std::string& file, bool elastic,
                               std::int64_t world, std::vector<std::string>& warnings);
  // After every rank loaded `dir`: their parameters must be the same bytes (collective).
  Status check_replicas_loaded_alike(const std::string& dir);
  // Collective: every rank's `mine`, in rank order (an agreement's control collective).
  Result<std::vector<std::int64_t>> every_ranks_value(const std::string& what, std::int64_t mine);
  // The merge of a checkpoint written by `old_world` ranks (elastic_resume.h); returns the
  // summary of what was merged for the log and appends rank 0's warnings to `warnings`.
  // `server_residual_folded`: whether a two_phase server residual went into the residual.
  Result<std::string> load_elastic(const std::string& dir, int old_world,
                                   std::vector<std::string>& warnings,
                                   bool& server_residual_folded);
  Status write_rank_checkpoint(const std::string& dir);
  // Collective: every rank learns every rank's failure, so that a failure on one rank (a file
  // missing on one node, a damaged rank file) ends every rank instead of leaving the others
  // waiting in a collective. Returns the same Status on every rank: ok, or the report of
  // comm::ErrorReport::status() (one line per distinct message, naming its ranks; a world of
  // one gets the local message as is).
  Status agree(const Status& local, const std::string& what);
  // Collective, at start-up: every rank's resolved config is rank 0's byte for byte, else every
  // rank fails naming the ranks that differ from rank 0 and the first differing key.
  Status check_same_config();
  // Local: the communicator was made for this run's comm.backend and comm.emulate, the
  // settings make_communicator fixes (train/run.h).
  Status check_communicator() const;
  // Collective, after build(): with comm.plan: auto, every rank's bucket choice is the same
  // (they read comm.plan_profile each), else every rank fails naming those that differ.
  Status check_same_plan();
  // Runs a control collective (agreement, config check) on the engine's thread, or before the
  // engine exists on a start-up engine bounded by comm.timeout_s.
  Status run_control(const std::string& what, const comm::CommQueue::Task& task);
  // control_ms/control_bytes: run()'s stop poll before the step, counted in it.
  StepMetrics step_once(double control_ms = 0, const comm::ByteCounters& control_bytes = {});
  // Collective, at the end of resume(): Note [A server residual no server sends]; `what`
  // names the resume in an agreed error.
  // Returns whether it folded a server residual into the error-feedback residual.
  Result<bool> fold_server_residual(const std::string& what);
  // Note [Stopping on a signal]: the signal some rank was asked to stop with (0: none), the
  // same on every rank.
  // `moved`, when given: the bytes its poll moved (none on one rank).
  Result<int> agree_on_stop_signal(comm::ByteCounters* moved = nullptr);
  Status write_trace();
  // Collective, at the start of run(): a fresh start's set-aside of other histories (with
  // their log.metrics), then train.checkpoint_dir made and checked, then log.metrics opened,
  // each agreed.
  Status open_run_outputs(std::int64_t stop_at);
  // A resume from this checkpoint_dir (its step, or a step set aside in it) with no step left
  // to run, to evaluate it again: it rewrites nothing there (run_outputs.cpp).
  bool only_evaluates_a_saved_step() const;
  // Collective, once per run: the steps of other histories in train.checkpoint_dir are set
  // aside (set_aside_checkpoints_from).
  Status set_aside_other_histories();
  // Collective: Note [Model state follows rank 0].
  Status share_model_state(const std::string& what);
  std::size_t memory_estimate_bytes() const;

  TrainConfig config_;
  Options options_;
  comm::Communicator& comm_;
  std::unique_ptr<ExecContext> context_;  // train.device: cuda (outlives the store)
  LocalRank local_;
  std::unique_ptr<Model> model_;
  ParamStore store_;
  ParamStore host_mirror_;  // GPU runs: the host copy host_params() returns
  std::unique_ptr<BatchStager> stager_;  // GPU runs: host batches -> device
  std::unique_ptr<BatchSource> train_data_, eval_data_;
  DataInfo data_info_;
  std::string initial_weights_format_;  // train.init_format resolved ("auto" read); "" if none
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<comm::BucketPlan> plan_;
  bool split_tied_ = false;  // comm.split_tied_embedding resolved (Note [Tied embedding split])
  std::string plan_choice_;  // comm.plan: auto's choice, joined (check_same_plan)
  std::unique_ptr<compress::GradientExchange> exchange_;
  TraceRecorder trace_;
  std::unique_ptr<comm::CommEngine> engine_;  // control traffic; the buckets too on the CPU
  std::unique_ptr<comm::CommQueue> bucket_queue_;  // several GPUs: NCCL (comm/nccl_queue.h)
  std::unique_ptr<comm::WfbpScheduler> scheduler_;
  std::unique_ptr<DataParallelStepper> stepper_;
  JsonlWriter metrics_;
  std::vector<Batch> batches_;
  // Note [A dry run's activations]
  // A dry run builds the model for one row and plans the micro-batch's activations from it and
  // from a throwaway plan of two rows, a + (B - 1)(a2 - a): each model's activations are a
  // fixed part (VGG's im2col areas and 3x3 workspace, per image) and a part per row. Scaling
  // the one-row figure by B counted the fixed part B times: VGG-16's dry run said 1726 MiB
  // where the run says 360 (review, 2026-12-08). Empty outside a dry run.
  std::optional<std::size_t> planned_activation_bytes_;

  std::int64_t step_ = 0;  // steps completed
  std::int64_t nonfinite_in_a_row_ = 0;
  std::int64_t skipped_total_ = 0;
  std::string resumed_from_;          // the step directory resume() loaded, if any
  std::int64_t start_step_ = 0;       // its step (0: a fresh start)
  std::int64_t saved_step_ = -1;      // the newest step this invocation saved; -1: none yet
  // Note [An evaluation a stop skipped]: step_'s periodic evaluation is still to run (checkpoint
  // metadata "eval_pending").
  bool eval_pending_ = false;
  bool other_histories_checked_ = false;  // set_aside_checkpoints_from() ran before the first save
  // The caller's OpenMP thread count before train.threads changed it; restored on destruction
  // (0: unchanged), so that an embedder's count and the next Trainer's default are its own.
  int caller_threads_ = 0;
};

}  // namespace sparq::train
