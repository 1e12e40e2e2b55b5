// Trainer: one step (step_once), the trace, and the run loop with its progress, evaluation and
// checkpoint cadence. Set-up is in trainer_setup.cpp, evaluation in trainer_evaluate.cpp, the
// start-up description in trainer_describe.cpp, checkpoints in checkpointing.cpp, the ranks'
// agreement on a resume in resume_agreement.cpp.
#include "train/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <span>

#include "comm/agree.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/ops.h"
#include "core/threading.h"
#include "core/timer.h"
#include "train/checkpoint.h"
#include "train/stop_signals.h"

namespace sparq::train {

Trainer::Trainer(const TrainConfig& config, comm::Communicator& comm)
    : config_(config), comm_(comm) {}

Trainer::~Trainer() {
  // Tasks still queued (a step left by an exception) call into the scheduler and stepper:
  // drain the queues, bounded by comm.timeout_s, before those go. Then tear down in
  // dependency order (the scheduler and stepper reference the engine).
  for (comm::CommQueue* queue :
       {bucket_queue_.get(), static_cast<comm::CommQueue*>(engine_.get())}) {
    if (queue == nullptr) continue;
    try {
      (void)queue->wait_all();
    } catch (...) {  // its exception was the step's; a destructor must not throw
    }
  }
  stepper_.reset();
  scheduler_.reset();
  bucket_queue_.reset();
  engine_.reset();
  if (caller_threads_ > 0) set_num_threads(caller_threads_);
}

Result<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& config,
                                                 comm::Communicator& comm, Options options) {
  std::unique_ptr<Trainer> t(new Trainer(config, comm));
  // Before anything is built: ranks with different configs would build different models and
  // bucket plans and then mismatch their collectives (or silently average unlike things).
  const Status made_for_this_run = t->check_communicator();
  const Status same_config = t->check_same_config();  // collective: every rank calls it
  SPARQ_RETURN_IF_ERROR(
      t->agree(made_for_this_run.is_ok() ? same_config : made_for_this_run, "comparing configs"));
  // Every rank runs the same comm settings now, this run's (Note [Control settings until the
  // config agrees], comm/communicator.h).
  t->comm_.settle_options({.allreduce = config.comm.allreduce, .mpi_wait = config.comm.mpi_wait});
  t->options_ = options;
  SPARQ_RETURN_IF_ERROR(t->agree(t->build(options), "setting up"));
  SPARQ_RETURN_IF_ERROR(t->agree(t->connect_buckets(), "connecting the gradient buckets"));
  SPARQ_RETURN_IF_ERROR(t->agree(t->check_same_plan(), "comparing bucket choices"));
  return t;
}

Status Trainer::run_control(const std::string& what, const comm::CommQueue::Task& task) {
  // While the engine lives, only its thread may call the communicator. Before it exists (and
  // when building failed before creating it) a start-up engine runs the task, so that a rank
  // that never arrives ends the job after comm.timeout_s instead of hanging it.
  if (engine_) return engine_->run(what, step_, task);
  comm::CommEngine startup(comm_, {.timeout_s = config_.comm.timeout_s, .name = "start-up"});
  return startup.run(what, step_, task);
}

Status Trainer::agree(const Status& local, const std::string& what) {
  // Every rank returns the same report of every rank's failure (comm/agree.h), which rank 0
  // prints: one line per distinct message, naming its ranks.
  Status agreed;
  SPARQ_RETURN_IF_ERROR(run_control("agree: " + what, [&](comm::Communicator& c) {
    agreed = comm::agree_on_errors(c, local);
    return Status::ok();
  }));
  return agreed;
}

StepMetrics Trainer::step_once(double control_ms, const comm::ByteCounters& control_bytes) {
  model_->set_training(true);
  for (std::size_t a = 0; a < batches_.size(); ++a) {
    batches_[a] = train_data_->next(static_cast<int>(a));
    if (stager_) batches_[a] = stager_->stage(batches_[a], static_cast<int>(a));
  }
  StepMetrics m;
  m.result = stepper_->step(step_, batches_);
  // run()'s stop poll is part of the step: on a slow link it costs a latency per step, which
  // step_ms, the exposed time and items/s left out (review, 2026-12-07).
  m.result.step_ms += control_ms;
  m.result.comm.add_exposed_control(control_ms, control_bytes);
  // A GPU store's received messages were validated on the device during the step; a failure
  // ends the run as the CPU's check_message does inside the step (data_parallel.cpp).
  const Status received = exchange_->check_device_messages();
  SPARQ_CHECK(received.is_ok(), "communication failed: {}", received.message());
  const StepResult& r = m.result;
  ++step_;
  m.total_steps = config_.train.steps;
  m.unit = data_info_.unit;
  m.payload_bytes = exchange_->last_payload_bytes();
  m.payload_bytes += r.tied_rows_bytes;  // the split tied table's exact rows
  m.dense_bytes = exchange_->last_dense_bytes();
  m.residual_norm = exchange_->residual_norm();
  m.rel_compression_error = exchange_->rel_compression_error();
  m.bucket_rel_error = exchange_->bucket_rel_errors();
  m.never_sent_share = exchange_->never_sent_share();
  const double items = static_cast<double>(train_data_->items_per_batch()) *
                       static_cast<double>(batches_.size()) * comm_.size();
  m.items_per_s = r.step_ms > 0 ? items / (r.step_ms / 1e3) : 0.0;
  if (r.skipped) {
    ++nonfinite_in_a_row_;
    ++skipped_total_;
    // A non-finite local gradient never reaches the residual (Note [Non-finite local
    // gradients], gradient_exchange.h); a residual can still overflow from finite inputs, and
    // keeping it would poison every later step, so then it restarts from zero.
    exchange_->residual_to_host();  // a GPU store's residual lives on the device
    const std::span<float> e = exchange_->residual();
    if (!e.empty() && !ops::all_finite(e.data(), e.size())) {
      std::fill(e.begin(), e.end(), 0.0f);
      exchange_->residual_to_device();
      spdlog::warn("step {}: non-finite gradient; error-feedback residual reset", step_);
    }
  } else {
    nonfinite_in_a_row_ = 0;
  }
  return m;
}

StepMetrics Trainer::train_step() {
  // The counters both checks read are the same on every rank (skips are agreed), so every
  // rank ends here together, as run() returns its error on all of them.
  const Status ready = optimizer_->check_step(step_);
  SPARQ_CHECK(ready.is_ok(), "{}", ready.message());
  StepMetrics m = step_once();
  SPARQ_CHECK(nonfinite_in_a_row_ < config_.train.max_nonfinite_in_a_row,
              "step {}: the gradient was not finite in {} steps in a row "
              "(train.max_nonfinite_in_a_row = {})",
              step_, nonfinite_in_a_row_, config_.train.max_nonfinite_in_a_row);
  return m;
}

Result<TrainSummary> Trainer::run(std::int64_t stop_at) {
  const TrainConfig& c = config_;
  SPARQ_RETURN_IF_ERROR(open_run_outputs(stop_at));
  if (stop_at >= 0 && stop_at < step_) {
    // It used to stop at once and report "stopped after 0 steps (5..4, ...)" (review).
    return agree(
        Status::error("--stop-at {} is below step {}, where this run resumed", stop_at, step_),
        "--stop-at");
  }
  if (stop_at > c.train.steps && is_root()) {
    // It was ignored without a word (review, 2026-12-07).
    spdlog::warn(
        "--stop-at {} is past train.steps {}: the run ends at step {} as usual, with "
        "its final evaluation{}",
        stop_at, c.train.steps, c.train.steps,
        c.train.checkpoint_dir.empty() ? "" : " and checkpoint");
  }
  if (!resumed_from_.empty() && c.train.checkpoint_dir.empty() && step_ < c.train.steps &&
      (stop_at < 0 || stop_at > step_) && is_root()) {
    // A DDP user expects a resumed run to go on saving; one resumed without the --set
    // train.checkpoint_dir it was started with trained on and saved nothing, said only as a
    // changed setting at info level (review, 2026-12-08). Not for a resume that trains no step
    // (an export of the checkpoint, its final evaluation).
    spdlog::warn(
        "resumed from {}, but train.checkpoint_dir is not set: this run saves no checkpoint "
        "(--set train.checkpoint_dir={} goes on saving where it left off)",
        resumed_from_, std::filesystem::path(resumed_from_).parent_path().string());
  }
  // Note [An evaluation a stop skipped]: the resumed step's periodic evaluation first (a run
  // that ends at this step evaluates it as its final one anyway).
  TrainSummary summary;
  if (eval_pending_ && c.train.eval_interval > 0 && step_ < c.train.steps &&
      (stop_at < 0 || step_ < stop_at)) {
    // A stop asked before it keeps it pending and runs no step: run, then stopped before the
    // first step, it was run again by the next resume (no step, so nothing saved; review,
    // 2026-12-07). A stop asked while it runs still ends the run after it, with the same
    // checkpoint: docs/reliability.md says the record may then come twice.
    if (options_.stop_requested) {
      SPARQ_ASSIGN_OR_RETURN(summary.stop_signal, agree_on_stop_signal());
    }
    if (summary.stop_signal == 0) {
      if (is_root()) spdlog::info("step {}: its evaluation, which the stop skipped", step_);
      evaluate_and_report();
    }
  }
  if (summary.stop_signal == 0) eval_pending_ = false;
  const std::int64_t first_step = step_, first_skipped = skipped_total_;
  const std::int64_t trace_end = c.log.trace_start + c.log.trace_steps;
  std::vector<double> losses;
  double time_ms = 0, items = 0, bytes = 0, payload = 0, dense = 0;
  Stopwatch wall;
  while (step_ < c.train.steps && summary.stop_signal == 0) {
    if (stop_at >= 0 && step_ >= stop_at) break;
    double poll_ms = 0;
    comm::ByteCounters poll_bytes;
    if (options_.stop_requested) {
      const Stopwatch poll_watch;
      SPARQ_ASSIGN_OR_RETURN(summary.stop_signal, agree_on_stop_signal(&poll_bytes));
      if (summary.stop_signal != 0) break;
      poll_ms = poll_watch.millis();
    }
    const bool tracing = !c.log.trace_path.empty() && step_ >= c.log.trace_start &&
                         step_ < trace_end;
    // The counters it checks are the same on every rank (skips are agreed), so every rank
    // fails here together and agreeing makes the error one line, as below.
    if (const Status ready = optimizer_->check_step(step_); !ready.is_ok()) {
      return agree(ready, "the optimizer's state");
    }
    trace_.enable(tracing);
    StepMetrics m = step_once(poll_ms, poll_bytes);
    trace_.enable(false);
    const StepResult& r = m.result;
    // An applied step's loss is finite in practice (a non-finite one makes the gradient so);
    // a non-finite one is kept out of the run's mean rather than making it NaN.
    if (!r.skipped && std::isfinite(r.loss)) losses.push_back(r.loss);
    time_ms += r.step_ms;
    items += m.items_per_s * r.step_ms / 1e3;
    bytes += static_cast<double>(r.comm.bytes_sent);
    payload += static_cast<double>(m.payload_bytes);
    dense += static_cast<double>(m.dense_bytes);
    const std::int64_t done = step_ - first_step;
    // From wall time, not the steps' own: evaluations, checkpoints and data loading take
    // their share too (review: "eta 3s" with 11 s left when evals were a large part).
    m.eta_s = wall.seconds() / static_cast<double>(done) * static_cast<double>(c.train.steps - step_);
    if (is_root()) {
      metrics_.write(to_json(m));
      if (c.log.progress_interval > 0 &&
          (step_ % c.log.progress_interval == 0 || step_ == c.train.steps ||
           step_ == first_step + 1)) {  // a resumed run's first step too (review, 2026-12-07)
        spdlog::info("{}", format_progress(m));
      }
    }
    if (options_.on_step) options_.on_step(m);
    if (c.log.per_rank_timing) {
      fmt::print(stderr, "rank {} step {}: forward {:.1f} ms, backward {:.1f} ms, exposed comm {:.1f} ms, "
               "optimizer {:.1f} ms\n",
               comm_.rank(), m.step(), r.forward_ms, r.backward_ms, r.comm.exposed_ms,
               r.optimizer_ms);
    }
    if (nonfinite_in_a_row_ >= c.train.max_nonfinite_in_a_row) {
      // Every rank sees the same aggregated norm and stops at the same step; the message holds
      // nothing rank-local (not the local loss), so agreeing makes it one line, "on all N ranks".
      return agree(Status::error(
          "step {}: the gradient was not finite in {} steps in a row "
          "(train.max_nonfinite_in_a_row = {}): lower optim.lr or set optim.clip_norm",
          step_, nonfinite_in_a_row_, c.train.max_nonfinite_in_a_row),
                   "non-finite steps");
    }
    if (!c.log.trace_path.empty() && step_ == trace_end) SPARQ_RETURN_IF_ERROR(write_trace());
    const bool evaluates =
        c.train.eval_interval > 0 && step_ % c.train.eval_interval == 0 && step_ < c.train.steps;
    // Note [An evaluation a stop skipped]
    // A stop asked during a step that evaluates skips the evaluation and saves the step: the
    // grace period before SIGKILL (mpirun's second, a Slurm warning) may not cover one
    // (review, 2026-12-07: the evaluation ran in full first). The ranks poll again here, before
    // the periodic checkpoint, so that the step's checkpoint (saved after the loop) records the
    // evaluation as pending, and a resume from it runs it first: it was never run at all, and
    // the study tool dropped that step from every seed's curve (review, 2026-12-07).
    // Collective, as the poll above; only at the steps that evaluate.
    if (evaluates && options_.stop_requested) {
      SPARQ_ASSIGN_OR_RETURN(summary.stop_signal, agree_on_stop_signal());
      if (summary.stop_signal != 0) {
        eval_pending_ = true;
        break;
      }
    }
    // The checkpoint before the evaluation, as at the end of the run (below).
    if (!c.train.checkpoint_dir.empty() && c.train.checkpoint_interval > 0 &&
        step_ % c.train.checkpoint_interval == 0 && step_ < c.train.steps) {
      SPARQ_RETURN_IF_ERROR(save_checkpoint());
    }
    if (evaluates) evaluate_and_report();
  }
  summary.steps = step_;
  summary.data = data_info_;
  summary.steps_run = step_ - first_step;
  summary.skipped = skipped_total_;
  summary.skipped_run = skipped_total_ - first_skipped;
  // At or past stop_at, also when that is train.steps: no final evaluation or checkpoint, as
  // documented (the export of a final checkpoint evaluated and re-saved it; review).
  summary.stopped_early = (stop_at >= 0 && step_ >= stop_at) || summary.stop_signal != 0;
  if (summary.stop_signal != 0 && !c.train.checkpoint_dir.empty()) {
    // Note [Stopping on a signal]: what the run did since its last checkpoint is kept.
    // (A stop before an evaluating step's periodic checkpoint left it unsaved: saved here.)
    if (summary.steps_run > 0 && saved_step_ != step_) SPARQ_RETURN_IF_ERROR(save_checkpoint());
  }
  // A run that stops inside the trace window (a signal, --stop-at) writes the steps it traced,
  // after a signal's checkpoint (the grace period is for that); they were lost (review,
  // 2026-12-07). Every rank leaves the loop after the same step, so the gather is reached by
  // all.
  if (!c.log.trace_path.empty() && step_ > std::max(c.log.trace_start, first_step) &&
      step_ < trace_end) {
    SPARQ_RETURN_IF_ERROR(write_trace());
  }
  if (!summary.stopped_early) {
    // The checkpoint first: the evaluation changes nothing it holds (the evaluation data are
    // rewound each time), and a run stopped during a long final evaluation kept only its last
    // periodic checkpoint (review, 2026-12-06).
    if (!c.train.checkpoint_dir.empty()) {
      // A run resumed from its final checkpoint (to evaluate it again) does not rewrite it: the
      // rewrite would first clear its COMPLETE marker, and a failure then would leave nothing
      // to resume from. Nor does one that evaluates a step set aside in this directory
      // ("step-N.superseded"): its copy would set aside this directory's own history.
      if (!only_evaluates_a_saved_step()) {
        SPARQ_RETURN_IF_ERROR(save_checkpoint());
      } else if (is_root()) {
        spdlog::info("no step run since {} was resumed: it is left as it is, and nothing saved",
                     resumed_from_);
      }
    }
    // Note [A stop before the final evaluation]: a stop asked during the last step (or the
    // final checkpoint) skips the final evaluation, as it skips a periodic one, and the run
    // ends with 128 + the signal; it ran the evaluation in full and ended with status 0, so a
    // job script took an interrupted job for a finished one (review, 2026-12-07). A resume
    // from the final checkpoint runs only the evaluation. Without train.checkpoint_dir nothing
    // could resume it: the evaluation runs, the run's only result.
    if (options_.stop_requested && !c.train.checkpoint_dir.empty()) {
      SPARQ_ASSIGN_OR_RETURN(summary.stop_signal, agree_on_stop_signal());
    }
    if (summary.stop_signal != 0) {
      summary.stopped_early = true;
    } else {
      summary.eval = evaluate_and_report();
    }
  }
  summary.saved_step = saved_step_;
  const std::size_t tail = std::max<std::size_t>(1, losses.size() / 10);
  if (!losses.empty()) {
    summary.last_loss =
        std::accumulate(losses.end() - static_cast<std::ptrdiff_t>(tail), losses.end(), 0.0) /
        static_cast<double>(tail);
  }
  summary.seconds = wall.millis() / 1e3;
  if (summary.steps_run > 0) {
    summary.items_per_s = time_ms > 0 ? items / (time_ms / 1e3) : 0;
    summary.bytes_per_step = bytes / static_cast<double>(summary.steps_run);
    summary.compression_ratio = payload > 0 ? dense / payload : 1.0;
  }
  summary.param_checksum = param_checksum();
  if (is_root()) {
    metrics_.write(fmt::format(
        "{{\"event\":\"end\",\"step\":{},\"skipped\":{},\"param_checksum\":\"{:016x}\","
        "\"stopped_early\":{},\"stop_signal\":{}}}",
        summary.steps, summary.skipped, summary.param_checksum,
        summary.stopped_early ? "true" : "false",
        summary.stop_signal != 0 ? fmt::format("\"{}\"", stop_signal_name(summary.stop_signal))
                                 : std::string("null")));
    if (metrics_.lost_records() > 0) {
      spdlog::warn("log.metrics: {} records of this run could not be written to '{}'",
                   metrics_.lost_records(), c.log.metrics_path);
    }
  }
  return summary;
}

}  // namespace sparq::train
