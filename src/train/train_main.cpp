// train_main(): the `train` command line (apps/train.cpp is its main; a program that
// registers its own compressors, aggregations or models calls it to get the same tool).
//
//   mpirun -np 2 build/apps/train --config configs/default.yaml [--set key=value ...]
//   build/apps/train --config configs/gpt2_wikitext.yaml --dry-run
//   build/apps/train --config X.yaml --resume runs/x/checkpoints
//
// Exit status: 0 on success, 1 for a bad config, missing data, a refused checkpoint or a
// training failure, 2 for bad command-line arguments, 128 + the signal for a run stopped by
// SIGINT, SIGTERM or SIGUSR1 after saving its checkpoint (Note [Stopping on a signal],
// train/stop_signals.h). Errors are agreed between the ranks and
// printed once, by rank 0, one line per distinct message naming its ranks ("train: error (on
// all 3 ranks): ...", "train: error on rank 1 of 3: ..."; docs/reliability.md, "Errors").
#include "train/train_main.h"

#include <fmt/format.h>
#include <sparq/version.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>

#include "comm/agree.h"
#include "comm/comm_engine.h"
#include "core/cli_args.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/output_file.h"
#include "train/run.h"
#include "train/stop_signals.h"
#include "train/yaml_reader.h"

namespace {

// A failure only this process knows of (no communicator yet, no start-up engine): it prints
// it, naming its rank when there are several.
int fail_here(const sparq::Status& s, int rank, int world_size) {
  const std::string who = world_size > 1 ? fmt::format(" on rank {} of {}", rank, world_size) : "";
  fmt::print(stderr, "train: error{}: {}\n", who, s.message());
  return 1;
}

// An agreed failure (comm/agree.h; every Trainer error): the same report on every rank, one
// line per distinct message naming its ranks, printed once by rank 0. Every rank exits 1.
int fail_agreed(const sparq::Status& s, int rank, int world_size) {
  if (world_size == 1) return fail_here(s, rank, world_size);
  if (rank == 0) {
    std::string_view text = s.message();
    while (!text.empty()) {
      const std::size_t end = text.find('\n');
      fmt::print(stderr, "train: {}\n", text.substr(0, end));
      if (end == std::string_view::npos) break;
      text.remove_prefix(end + 1);
    }
  }
  return 1;
}

}  // namespace

namespace sparq::train {

namespace {

// What a stopped run (a stop signal, --stop-at) leaves to resume from: this run's newest save
// (a signal saves the step it stopped after; --stop-at saves no final checkpoint), else the
// checkpoint it resumed from, which stays as it was (review, 2026-12-07: --stop-at said
// nothing, then "nothing" after a resume).
std::string what_there_is_to_resume_from(const TrainSummary& s, const std::string& checkpoints,
                                         const std::string& resumed_from, std::int64_t last_step) {
  // Note [A stop before the final evaluation] (train/trainer.cpp).
  if (!checkpoints.empty() && s.saved_step == s.steps && s.steps >= last_step) {
    return fmt::format(
        "step {}, the last, is saved; its final evaluation was not run: --resume {} runs it",
        s.steps, checkpoints);
  }
  if (!checkpoints.empty() && s.saved_step == s.steps) {
    return fmt::format("step {} is saved: continue with --resume {}", s.steps, checkpoints);
  }
  const std::string head = s.steps_run == 0 ? "no step was run, nothing saved"
                           : checkpoints.empty()
                               ? "train.checkpoint_dir is not set, no checkpoint saved"
                               : "no final checkpoint";
  if (!checkpoints.empty() && s.saved_step >= 0) {
    return fmt::format("{}; the newest step this run saved is {}: --resume {} continues from it",
                       head, s.saved_step, checkpoints);
  }
  if (!resumed_from.empty()) {
    return fmt::format("{}; --resume {} continues from step {} as before", head, resumed_from,
                       s.steps - s.steps_run);
  }
  return head + (s.steps_run > 0 && !checkpoints.empty() ? ", and this run saved no step" : "");
}

}  // namespace

int train_main(int argc, char** argv) {
  CLI::App app{"sparq train: data-parallel training with compressed gradient communication"};
  app.set_version_flag("--version", "sparq train " SPARQ_VERSION_STRING);
  std::string config_path;
  std::vector<std::string> overrides;
  std::string resume;
  bool dry_run = false;
  std::int64_t stop_at = -1;
  std::string export_path;
  app.add_option("--config", config_path, "YAML config (see docs/config.md)")->required();
  app.add_option("--set", overrides, "override a config key: --set optim.lr=0.1 (repeatable)");
  app.add_option("--resume", resume,
                 "continue from a checkpoint directory (a step-* directory, or the checkpoint "
                 "root: its newest complete checkpoint)");
  app.add_flag("--dry-run", dry_run,
               "validate the config, build everything, print the resolved config, model, "
               "bucket plan and memory estimate, and exit");
  app.add_option("--stop-at", stop_at,
                 "stop once this many steps are done, as if interrupted (no final evaluation "
                 "or checkpoint); for testing resume")
      ->check(cli::non_negative_integer());
  app.add_option("--export-safetensors", export_path,
                 "after training, write the parameters (sparq names) to this safetensors file "
                 "(with --resume X --stop-at <its step>: export a checkpoint without training)");
  SPARQ_PARSE_ARGS(app, argc, argv);        // Note [App exit codes] (core/cli_args.h)
  if (dry_run && (stop_at >= 0 || !export_path.empty())) {
    // A dry run trains and writes nothing: the flag would be dropped without a word (review).
    if (cli::reports_argument_errors()) {
      fmt::print(stderr, "train: error: --dry-run trains and writes nothing: {} does not apply\n",
                 stop_at >= 0 ? "--stop-at" : "--export-safetensors");
    }
    return cli::argument_error_exit(2);  // Note [One report of a bad argument]
  }
  for (const std::string& o : overrides) {  // the shape of an argument: bad arguments, 2
    if (const auto shape = parse_set_argument(o); !shape.is_ok()) {
      // Note [One report of a bad argument] (core/cli_args.h)
      if (cli::reports_argument_errors()) {
        fmt::print(stderr, "train: error: {}\n", shape.status().message());
      }
      return cli::argument_error_exit(2);
    }
  }

  auto config = load_train_config(config_path, overrides);
  // A refused SPARQ_FAULT is reported with the config's errors, by every rank together, before
  // any step (a trial whose fault never fires would pass unfaulted).
  if (const Status fault = fault::check_environment(); config.is_ok() && !fault) config = fault;
  // Under mpirun, comm.backend: self makes each process a one-rank run writing the same logs,
  // checkpoints and traces (review, 2026-12-05). An embedder that wants independent runs in
  // one MPI job calls make_communicator itself, with its own paths.
  if (config.is_ok() && config->comm.backend == "self" && launched_world_size() > 1) {
    config = Status::error(
        "{}: comm.backend: self, but the launcher started {} processes: each would train "
        "alone and write the same metrics, checkpoints and trace; use comm.backend: auto (or "
        "mpi), or start one process",
        config->where(), launched_world_size());
  }

  // comm.allreduce and comm.emulate were validated with the config; before that (a bad
  // config) the defaults.
  auto made = make_communicator(config.is_ok() ? config->comm : CommConfig{}, &argc, &argv);
  if (!made.is_ok()) return fail_here(made.status(), 0, 1);
  std::unique_ptr<comm::Communicator> comm = std::move(made).value();
  const int rank = comm->rank();
  sparq::log::init({.rank = rank, .world_size = comm->size()});
  const int world = comm->size();
  {
    // A config error is usually every rank's (one file, the same --set): print it once. Before
    // the Trainer (and its engine) exists, a start-up engine bounds the wait for a rank that
    // never arrives.
    // Without a config, comm.timeout_s's default bounds the wait.
    const double timeout_s =
        config.is_ok() ? config->comm.timeout_s : CommConfig{}.timeout_s;
    sparq::comm::CommEngine startup(*comm, {.timeout_s = timeout_s, .name = "start-up"});
    sparq::Status agreed;
    const auto agree = [&](sparq::comm::Communicator& c) {
      agreed = sparq::comm::agree_on_errors(c, config.status());
      return sparq::Status::ok();
    };
    const sparq::Status s = startup.run("agree: loading the config", -1, agree);
    if (!s.is_ok()) return fail_here(s, rank, world);
    if (!agreed.is_ok()) return fail_agreed(agreed, rank, world);
  }

  RunOptions options;
  const ScopedStopSignalHandlers stop_signals;  // the caller's handlers return with us
  options.trainer.stop_requested = requested_stop_signal;
  options.trainer.dry_run = dry_run;
  options.resume = resume;
  options.stop_at = stop_at;
  options.export_safetensors = export_path;
  auto summary = run_training(*config, *comm, options);
  if (!summary.is_ok()) return fail_agreed(summary.status(), rank, world);
  if (dry_run) {
    if (rank == 0) fmt::print("{}", summary->dry_run_report);
    return 0;
  }
  if (rank == 0) {
    const TrainSummary& s = *summary;
    // The report goes after the export: on standard error when the export or the metrics
    // went to standard output, so that the stream holds the export or the JSONL records
    // alone (core/output_file.h; the metrics case was missed: review, 2026-12-07).
    const auto to_stdout = [](const std::string& path) {
      return !path.empty() && writes_to_standard_output(path);
    };
    std::FILE* report =
        to_stdout(export_path) || to_stdout(config->log.metrics_path) ? stderr : stdout;
    std::string result = std::isnan(s.eval.loss) ? std::string("loss n/a (no target scored)")
                                                 : fmt::format("loss {:.4f}", s.eval.loss);
    if (s.eval.perplexity >= 0) result += fmt::format(", perplexity {:.2f}", s.eval.perplexity);
    if (s.eval.accuracy >= 0) result += fmt::format(", accuracy {:.2f}%", 100 * s.eval.accuracy);
    if (s.data.entropy_rate >= 0 && !s.stopped_early && s.data.loss_bound > s.data.entropy_rate) {
      // Note [A row's achievable loss] (data/markov_source.h): the optimum is the bound.
      result += fmt::format(
          " (lowest achievable loss {:.4f}, the order-{} source's entropy rate {:.4f} on rows "
          "cut from its stream: {:.1f}% above the optimum)",
          s.data.loss_bound, s.data.source_order, s.data.entropy_rate,
          100.0 * (s.eval.loss / s.data.loss_bound - 1.0));
    } else if (s.data.entropy_rate >= 0 && !s.stopped_early) {
      result += fmt::format(" (entropy rate {:.4f}: {:.1f}% above the optimum",
                            s.data.entropy_rate,
                            100.0 * (s.eval.loss / s.data.entropy_rate - 1.0));
      // The eval sample's own deviation from the rate, so that a reader can tell sampling
      // noise from what the model has yet to learn (EvalMetrics::source_loss).
      if (s.eval.source_loss > 0) {
        result += fmt::format(
            "; the source scores {:.4f} on these targets, the model {:.1f}% above it",
            s.eval.source_loss, 100.0 * (s.eval.loss / s.eval.source_loss - 1.0));
      }
      result += ")";
    }
    // The time, speed, bytes and skips are this invocation's: a resumed run names its own
    // steps, and the skips before it apart.
    const auto plural = [](std::int64_t n) { return n == 1 ? "" : "s"; };
    // A resume that runs nothing (to evaluate a checkpoint) read "0 steps (5..4, resumed at
    // step 4)" (review, 2026-12-06).
    const std::string steps =
        s.steps_run == s.steps ? fmt::format("{} step{}", s.steps, plural(s.steps))
        : s.steps_run == 0     ? fmt::format("0 steps (resumed at step {})", s.steps)
                               : fmt::format("{} step{} ({}..{}, resumed at step {})", s.steps_run,
                                             plural(s.steps_run), s.steps - s.steps_run + 1, s.steps,
                                             s.steps - s.steps_run);
    const std::string skipped = s.skipped == s.skipped_run
                                    ? fmt::format("{} skipped", s.skipped_run)
                                    : fmt::format("{} skipped, {} before the resume", s.skipped_run,
                                                  s.skipped - s.skipped_run);
    const std::string how = s.stop_signal != 0
                                ? "stopped by " + stop_signal_name(s.stop_signal) + " after"
                            : s.stopped_early ? "stopped after"
                                              : "trained";
    fmt::print(report,
               "{} {} in {:.1f} s ({}) | final eval {} | {:.0f} {}/s | {} per step on rank "
               "0's wire, compression x{:.1f} | parameters checksum {:016x}\n",
               how, steps, s.seconds, skipped, s.stopped_early ? std::string("not run") : result,
               s.items_per_s, s.data.unit, format_bytes(s.bytes_per_step), s.compression_ratio,
               s.param_checksum);
    const std::string& checkpoints = config->train.checkpoint_dir;
    if (s.stopped_early) {
      fmt::print(report, "{}{}\n", s.stop_signal != 0 ? "" : "--stop-at: ",
                 what_there_is_to_resume_from(s, checkpoints, resume, config->train.steps));
    }
  }
  if (summary->stop_signal != 0) return 128 + summary->stop_signal;
  // A SPARQ_FAULT spec this rank never reached fails the trial (fault::check_all_fired); each
  // rank's own, said by that rank.
  if (const Status fired = fault::check_all_fired(summary->steps - summary->steps_run);
      !fired.is_ok()) {
    return fail_here(fired, rank, world);
  }
  return 0;
}

}  // namespace sparq::train
