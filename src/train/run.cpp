#include "train/run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "comm/agree.h"
#include "comm/comm_engine.h"
#include "comm/emulated_link.h"
#include "comm/mpi_communicator.h"
#include "core/fault.h"
#include "core/file_io.h"
#include "core/output_file.h"
#include "sim/auto_plan.h"
#include "train/output_paths.h"
#include "train/safetensors.h"
#include "train/stop_signals.h"

namespace sparq::train {

Result<TrainConfig> default_train_config() {
  SPARQ_ASSIGN_OR_RETURN(TrainConfig config, parse_train_config("{}", "<defaults>", {}));
  config.origin.clear();  // built in code from here on (validate_train_config names it so)
  config.origin_with_overrides.clear();
  return config;
}

namespace {

// A config's model fields are its spec's (effective_yaml writes the spec alone): a field
// edited in code trained while checkpoints and resolved_yaml recorded the spec, skipped
// validate_model_config, and was silently undone by any other edit's revalidation (review,
// 2026-12-05). Refused, naming the fields.
Status check_model_follows_spec(const TrainConfig& config, const std::string& origin) {
  auto from_spec = parse_model_spec(config.model.spec);
  if (!from_spec.is_ok()) return from_spec.status().with_context(origin + ": model");
  const std::vector<std::string> edited = differing_model_fields(*from_spec, config.model);
  if (edited.empty()) return Status::ok();
  return Status::error(
      "{}: model: {} edited in code, not in its spec '{}': build the model config with "
      "make_model_config() or parse_model_spec()",
      origin, fmt::join(edited, ", "), config.model.spec);
}

}  // namespace

Result<TrainConfig> validate_train_config(const TrainConfig& config) {
  const std::string yaml = effective_yaml(config);
  // A loaded config edited in code since: its errors name the edit, where they blamed the
  // file, which holds no such value, and dropped its --set keys (review, 2026-12-07).
  const bool edited_since_loaded =
      !config.origin.empty() && !config.resolved_yaml.empty() && yaml != config.resolved_yaml;
  const std::string origin = config.origin.empty() ? std::string("<in-code config>")
                             : edited_since_loaded ? config.where() + ", edited in code"
                                                   : config.origin;
  SPARQ_RETURN_IF_ERROR(check_model_follows_spec(config, origin));
  SPARQ_ASSIGN_OR_RETURN(TrainConfig validated, parse_train_config(yaml, origin, {}));
  // Still the file it was read from, and the --set keys it was read with still name where its
  // values came from (TrainConfig::where).
  if (!config.origin.empty()) validated.origin = config.origin;
  if (!config.origin_with_overrides.empty()) {
    validated.origin_with_overrides = config.origin_with_overrides;
  }
  return validated;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

int launched_world_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* text = std::getenv(v);
    if (text == nullptr) continue;
    const int size = std::atoi(text);
    if (size > 0) return size;
  }
  return 0;
}

Result<std::unique_ptr<comm::Communicator>> make_communicator(const CommConfig& config, int* argc,
                                                              char*** argv) {
  // A CommConfig built in code skips the config reader's choices: an unknown backend was a
  // single process without a word, an unknown algorithm or wait the default (review,
  // 2026-12-07).
  if (config.backend != "auto" && config.backend != "mpi" && config.backend != "self") {
    return Status::error("comm.backend: '{}' is not one of auto, mpi, self", config.backend);
  }
  if (!comm::allreduce_algorithm_from_name(config.allreduce)) {
    return Status::error("comm.allreduce: '{}' is not an allreduce algorithm", config.allreduce);
  }
  if (!comm::mpi_wait_from_name(config.mpi_wait)) {
    return Status::error("comm.mpi_wait: '{}' is not a way of waiting", config.mpi_wait);
  }
  std::unique_ptr<comm::Communicator> comm;
  // auto: MPI under a launcher, or when the program has initialised MPI itself (a host whose
  // launcher sparq does not recognise; review, 2026-12-06).
  if (config.backend == "mpi" ||
      (config.backend == "auto" && (launched_by_mpi() || comm::mpi_in_use()))) {
    comm::MpiOptions options;
    options.allreduce = comm::allreduce_algorithm_from_name(config.allreduce)
                            .value_or(comm::AllreduceAlgorithm::kAuto);
    options.wait = comm::mpi_wait_from_name(config.mpi_wait).value_or(comm::MpiWait::kBusy);
    // Note [Control settings until the config agrees] (comm/communicator.h): the trainer
    // applies these once every rank's config is known to be the same.
    options.settle_later = true;
    SPARQ_ASSIGN_OR_RETURN(comm, comm::make_mpi_communicator(argc, argv, options));
  } else {
    comm = comm::make_self_communicator();
  }
  if (config.emulate.enabled()) {
    // Control traffic crosses the same slow link, priced in its real world; an emulated world
    // (emulate.ranks) is the GPU bucket queue's (comm/nccl_queue.h).
    comm::EmulatedLink host = config.emulate;
    host.ranks = 0;
    comm = comm::make_emulated_link(std::move(comm), host);
  }
  return comm;
}

// comm.plan: auto with the step simulator: the config's own layout and plan rebuilt by the
// simulator (they must match the trainer's bucket for bucket), the profile's link, this world.
Result<BucketChoice> plan_with_simulator(const TrainConfig& c, const comm::BucketPlan& plan,
                                         int world_size) {
  SPARQ_ASSIGN_OR_RETURN(auto profile, sim::load_profile(c.comm.plan_profile));
  auto link = profile.network(c.comm.plan_network);
  if (!link.is_ok()) return link.status().with_context("comm.plan_network");
  SPARQ_ASSIGN_OR_RETURN(auto layout, sim::build_layout(c));
  SPARQ_ASSIGN_OR_RETURN(sim::AutoPlan chosen,
                         sim::choose_auto_plan(*layout, c, profile, *link, world_size,
                                               c.comm.plan_min_compression));
  const comm::BucketPlan& simulated = chosen.tied_split ? *layout->split_plan : *layout->plan;
  bool same = simulated.size() == plan.size();
  for (std::size_t b = 0; same && b < plan.size(); ++b) {
    same = simulated.buckets()[b].range == plan.buckets()[b].range &&
           simulated.buckets()[b].dense == plan.buckets()[b].dense;
  }
  if (!same) {
    return Status::error("comm.plan: auto: the simulator's bucket plan ({} buckets) differs "
                         "from the trainer's ({}); report this as a bug",
                         simulated.size(), plan.size());
  }
  BucketChoice out{std::move(chosen.bucket_choice), std::move(chosen.reasons)};
  out.report.push_back(fmt::format(
      "predicted step {:.1f} ms, exposed communication {:.1f} ms, compression x{:.1f} "
      "(the fixed plan: {:.1f} ms, {:.1f} ms exposed) on {} ranks over {} of profile {}",
      chosen.predicted_step_ms, chosen.predicted_exposed_ms, chosen.compression_ratio,
      chosen.fixed_step_ms, chosen.fixed_exposed_ms, world_size, link->name, profile.name));
  if (world_size == 1) {
    // One rank sends nothing, so every option costs the same and the fixed plan stays: a
    // dry run started without the launcher showed that as the plan (review, 2026-12-06).
    out.report.push_back(
        "one rank communicates nothing, so this is the fixed plan; start the run (or the dry "
        "run) under the launcher with its ranks to see theirs: mpirun -np N ... --dry-run");
  }
  return out;
}

Result<TrainSummary> run_training(const TrainConfig& config_in, comm::Communicator& comm,
                                  const RunOptions& options_in) {
  RunOptions options = options_in;
  if (!options.trainer.plan_buckets) options.trainer.plan_buckets = plan_with_simulator;
  options.trainer.resuming = !options.resume.empty();
  // What the train command refuses before it gets here, an embedder's call is refused too
  // (review, 2026-12-05): a malformed SPARQ_FAULT aborted the first step, and a dry run
  // dropped stop_at and the export without a word.
  // Agreed below with the export path: SPARQ_FAULT is each process's environment, and a spec
  // refused on one rank alone returned there while the others waited in the start-up
  // agreement until comm.timeout_s (review, 2026-12-07).
  const Status faults =
      fault::check_job({.app = "train",
                        .world_size = comm.size(),
                        .mpi = comm.backend().starts_with("mpi"),
                        .checkpoints = !config_in.train.checkpoint_dir.empty(),
                        .compresses = !config_in.compress.compress.compression_off(),
                        .steps = config_in.train.steps});
  // Every check below is this rank's own and is agreed with the others before anything
  // returns: an embedder's ranks may hold different configs or options (a data shard on some
  // nodes only, an export path named on rank 0), and a rank that returned alone left the
  // others in the agreement until comm.timeout_s aborted the job (review, 2026-12-07).
  Status local = faults;
  if (local.is_ok() && options.trainer.dry_run &&
      (options.stop_at >= 0 || !options.export_safetensors.empty())) {
    local = Status::error("a dry run trains and writes nothing: {} does not apply",
                          options.stop_at >= 0 ? "stop_at" : "export_safetensors");
  }
  // A config built or edited in code since it was read or validated no longer matches its
  // resolved_yaml: it gets the YAML checks now.
  TrainConfig config = config_in;
  if (local.is_ok()) {
    local = check_model_follows_spec(config,
                                     config.origin.empty() ? "<in-code config>" : config.origin);
  }
  if (local.is_ok() && effective_yaml(config) != config.resolved_yaml) {
    auto validated = validate_train_config(config_in);
    if (validated.is_ok()) {
      config = std::move(validated).value();
    } else {
      local = validated.status();
    }
  }
  // An unchecked config's timeout may be anything: the agreement waits the default then.
  const double startup_timeout_s = local.is_ok() ? config.comm.timeout_s : CommConfig{}.timeout_s;
  {
    // Rank 0 writes the export after training; a path it cannot write was found then, and a
    // run without checkpoints lost its weights (review, 2026-12-06). Agreed on a start-up
    // engine (the trainer's does not exist yet), so every rank stops alike; agreed always,
    // so that an embedder that names the path on rank 0 only still makes the same calls.
    Status writable = local;
    if (writable.is_ok() && comm.rank() == 0 && !options.export_safetensors.empty()) {
      writable = check_output_file_can_be_written(options.export_safetensors,
                                                  "export_safetensors (--export-safetensors)");
    }
    if (writable.is_ok() && comm.rank() == 0) {
      writable = check_outputs_spare_inputs(config, options.export_safetensors);
    }
    Status agreed;
    comm::CommEngine startup(comm, {.timeout_s = startup_timeout_s, .name = "start-up"});
    SPARQ_RETURN_IF_ERROR(startup.run("agree: the config, SPARQ_FAULT and the output paths", -1,
                                      [&](comm::Communicator& c) {
                                        agreed = comm::agree_on_errors(c, writable);
                                        return Status::ok();
                                      }));
    SPARQ_RETURN_IF_ERROR(agreed);
  }
  SPARQ_ASSIGN_OR_RETURN(auto trainer, Trainer::create(config, comm, options.trainer));
  Trainer& t = *trainer;
  const bool root = comm.rank() == 0;
  if (options.trainer.dry_run) {
    // With --resume the checkpoint is loaded too (every check a real resume makes), so a
    // large job can be checked before it is launched; it used to be ignored (review).
    if (!options.resume.empty()) SPARQ_RETURN_IF_ERROR(t.resume(options.resume));
    TrainSummary dry;
    dry.dry_run_report = fmt::format("# resolved config ({})\n{}\n\n{}", config.origin,
                                     config.resolved_yaml, t.describe());
    if (!options.resume.empty()) {
      dry.dry_run_report +=
          fmt::format("dry run: configuration valid, resumes {} at step {}, nothing trained\n",
                      options.resume, t.step());
    } else {
      dry.dry_run_report += "dry run: configuration valid, nothing trained\n";
    }
    return dry;
  }
  if (!options.resume.empty()) SPARQ_RETURN_IF_ERROR(t.resume(options.resume));
  if (root) spdlog::info("config {}\n{}", config.origin, t.describe());
  SPARQ_ASSIGN_OR_RETURN(TrainSummary summary, t.run(options.stop_at));
  // Stopped by a signal: the checkpoint holds the step, and the export is of finished runs
  // (mpirun's SIGKILL follows its SIGTERM within a second). Without a checkpoint folder the
  // export is all the run leaves: written then too (the trained parameters were lost; review,
  // 2026-12-07).
  const bool stopped = summary.stop_signal != 0;
  // (Not before a step of its own: the file would take the parameters the run started from,
  // and replace what an earlier run left there.)
  const bool exports = !options.export_safetensors.empty() &&
                       (!stopped || (config.train.checkpoint_dir.empty() && summary.steps_run > 0));
  if (!options.export_safetensors.empty() && stopped && root) {
    if (exports) {
      spdlog::warn(
          "stopped by {} with no train.checkpoint_dir: {} takes the parameters of step "
          "{}, this run's only output (train.init_from reads it; nothing resumes it)",
          stop_signal_name(summary.stop_signal), options.export_safetensors, t.step());
    } else {
      spdlog::warn("stopped by {}: {} not written ({})", stop_signal_name(summary.stop_signal),
                   options.export_safetensors,
                   config.train.checkpoint_dir.empty() ? "no step was run"
                                                       : "the checkpoint holds the step");
    }
  }
  if (exports) {
    Status exported;
    if (root) {
      exported = export_safetensors(
          t.host_params(), options.export_safetensors,
          {{"model", config.model.spec}, {"step", std::to_string(t.step())}}, t.model_state());
      if (exported.is_ok()) {
        spdlog::info("parameters of step {} exported to {}", t.step(), options.export_safetensors);
      }
    }
    // Only rank 0 writes: its failure is its own (the other ranks have finished), worded as
    // an agreed report of one rank is (comm/agree.h) so that callers print every error alike.
    if (!exported.is_ok()) {
      if (comm.size() == 1) return exported;
      return Status::error("error on rank 0 of {}: {}", comm.size(), exported.message());
    }
  }
  return summary;
}

}  // namespace sparq::train
