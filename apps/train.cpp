// train: data-parallel training with compressed gradient communication (src/train/trainer.h).
//
//   mpirun -np 2 build/apps/train --config configs/default.yaml [--set key=value ...]
//   build/apps/train --config configs/gpt2_wikitext.yaml --dry-run
//   build/apps/train --config X.yaml --resume runs/x/checkpoints
//
// Exit status: 0 on success, 1 for a bad config, missing data, a refused checkpoint or a
// training failure, 2 for bad command-line arguments. Errors are agreed between the ranks and
// printed once, by rank 0, one line per distinct message naming its ranks ("train: error (on
// all 3 ranks): ...", "train: error on rank 1 of 3: ..."; docs/reliability.md, "Errors").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "comm/agree.h"
#include "comm/comm_engine.h"
#include "comm/communicator.h"
#include "comm/emulated_link.h"
#include "comm/mpi_communicator.h"
#include "core/log.h"
#include "train/safetensors.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace {

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

// A failure only this process knows of (no communicator yet, or rank 0's export): it prints
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

int main(int argc, char** argv) {
  CLI::App app{"sparq train: data-parallel training with compressed gradient communication"};
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
      ->check(CLI::NonNegativeNumber);
  app.add_option("--export-safetensors", export_path,
                 "after training, write the parameters (sparq names) to this safetensors file "
                 "(with --resume X --stop-at <its step>: export a checkpoint without training)");
  CLI11_PARSE(app, argc, argv);

  auto config = sparq::train::load_train_config(config_path, overrides);

  std::unique_ptr<sparq::comm::Communicator> comm;
  const std::string backend = config.is_ok() ? config->comm.backend : "auto";
  if (backend == "mpi" || (backend == "auto" && launched_by_mpirun())) {
    // comm.allreduce was validated with the config; before that (a bad config) the default.
    sparq::comm::MpiOptions options;
    if (config.is_ok()) {
      options.allreduce = sparq::comm::allreduce_algorithm_from_name(config->comm.allreduce)
                              .value_or(sparq::comm::AllreduceAlgorithm::kAuto);
    }
    auto mpi = sparq::comm::make_mpi_communicator(&argc, &argv, options);
    if (!mpi.is_ok()) return fail_here(mpi.status(), 0, 1);
    comm = std::move(mpi).value();
  } else {
    comm = sparq::comm::make_self_communicator();
  }
  if (config.is_ok() && config->comm.emulate.enabled()) {
    comm = sparq::comm::make_emulated_link(std::move(comm), config->comm.emulate);
  }
  const int rank = comm->rank();
  sparq::log::init({.rank = rank, .world_size = comm->size()});
  const int world = comm->size();
  {
    // A config error is usually every rank's (one file, the same --set): print it once. Before
    // the Trainer (and its engine) exists, a start-up engine bounds the wait for a rank that
    // never arrives.
    // Without a config, comm.timeout_s's default bounds the wait.
    const double timeout_s =
        config.is_ok() ? config->comm.timeout_s : sparq::train::CommConfig{}.timeout_s;
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

  auto trainer = sparq::train::Trainer::create(*config, *comm, {.dry_run = dry_run});
  if (!trainer.is_ok()) return fail_agreed(trainer.status(), rank, world);
  sparq::train::Trainer& t = **trainer;
  if (dry_run) {
    if (rank == 0) {
      fmt::print("# resolved config ({})\n{}\n\n{}", config_path, config->resolved_yaml,
                 t.describe());
      fmt::print("dry run: configuration valid, nothing trained\n");
    }
    return 0;
  }
  if (!resume.empty()) {
    const sparq::Status s = t.resume(resume);
    if (!s.is_ok()) return fail_agreed(s, rank, world);
  }
  if (rank == 0) spdlog::info("config {}\n{}", config_path, t.describe());
  auto summary = t.run(stop_at);
  if (!summary.is_ok()) return fail_agreed(summary.status(), rank, world);
  if (rank == 0 && !export_path.empty()) {
    const sparq::Status s = sparq::train::export_safetensors(
        t.host_params(), export_path,
        {{"model", config->model.spec}, {"step", std::to_string(t.step())}});
    if (!s.is_ok()) return fail_here(s, rank, world);
    spdlog::info("parameters of step {} exported to {}", t.step(), export_path);
  }
  if (rank == 0) {
    const sparq::train::TrainSummary& s = *summary;
    std::string result = fmt::format("loss {:.4f}", s.eval.loss);
    if (s.eval.perplexity >= 0) result += fmt::format(", perplexity {:.2f}", s.eval.perplexity);
    if (s.eval.accuracy >= 0) result += fmt::format(", accuracy {:.2f}%", 100 * s.eval.accuracy);
    if (t.data_info().entropy_rate >= 0 && !s.stopped_early) {
      result += fmt::format(" (entropy rate {:.4f}: {:.1f}% above the optimum)",
                            t.data_info().entropy_rate,
                            100.0 * (s.eval.loss / t.data_info().entropy_rate - 1.0));
    }
    fmt::print(
        "{} {} steps in {:.1f} s ({} skipped) | final eval {} | {:.0f} {}/s | {} per step per "
        "rank on the wire, compression x{:.1f} | parameters checksum {:016x}\n",
        s.stopped_early ? "stopped after" : "trained", s.steps, s.seconds, s.skipped,
        s.stopped_early ? std::string("not run") : result, s.items_per_s, t.data_info().unit,
        sparq::train::format_bytes(s.bytes_per_step), s.compression_ratio, s.param_checksum);
  }
  return 0;
}
