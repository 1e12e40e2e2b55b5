// simulate: the alpha-beta model of a data-parallel WFBP step (docs/simulate.md) for a
// training config on a machine profile, over world sizes, networks and compression cells.
//   build/apps/simulate --config configs/gpt2_wikitext.yaml --profile profiles/h100_node.yaml
//       --network 10gbit --network 100gbit [--world 2,4,...,1024] [--cells topk,lbs_allgather]
//       [--csv out.csv] [--allreduce config|ring|best|auto] [--gather best|ring] [--buckets P]
//       [--compute-ms FORWARD,BACKWARD[,OPTIMIZER]] [--busy-comm-rate R] [--plan config|fixed|auto]
//       [--set key=value ...]
// With --plan auto (or comm.plan: auto in the config), each compressed cell also gets a
// "<cell>+auto" row: the automatic plan.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string_view>

#include "core/cli_args.h"
#include "core/output_file.h"
#include "sim/auto_plan.h"
#include "sim/profile.h"
#include "sim/step_model.h"
#include "sim/workload.h"
#include "simulate_args.h"
#include "train/train_config.h"

namespace {

using namespace sparq;

// --buckets P: when each bucket became ready, started and ended, and what it sent.
void print_timeline(const sim::StepResult& step) {
  // The step's control allreduces come first (Note [Per-step control]): backward ends after
  // them too.
  fmt::print(
      "         bucket  ready_ms  start_ms    end_ms   MB_sent   (backward ends at {:.3f}; "
      "the step's control allreduces take {:.3f} before the forward)\n",
      step.control_ms + step.forward_ms + step.backward_ms, step.control_ms);
  for (const sim::BucketTiming& b : step.buckets)
    fmt::print("         {:>6} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}\n", b.index, b.ready_ms,
               b.start_ms, b.end_ms, b.bytes_sent / 1e6);
}

// "allgather x3, dense x1": how many compressed buckets the automatic plan sends each way.
std::string choice_summary(const sim::AutoPlan& plan) {
  std::map<std::string, int> counts;
  for (const std::string& choice : plan.bucket_choice) {
    if (!choice.empty()) ++counts[choice];
  }
  std::string out;
  for (const auto& [choice, count] : counts) {
    out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", choice, count);
  }
  return out;
}

struct Row {
  std::string network, cell;
  int world = 0;
  bool tied_split = false;
  sim::StepResult step;
  double single_ms = 0, efficiency = 0;
};

Status run(const std::string& config_path, const std::vector<std::string>& sets,
           const std::string& profile_path, const std::vector<std::string>& networks,
           const sim_app::Arguments& args, const std::string& csv_path, double busy_comm_rate) {
  SPARQ_ASSIGN_OR_RETURN(auto profile, sim::load_profile(profile_path));
  const std::vector<int>& worlds = args.worlds;
  const int timeline_world = args.timeline_world;
  std::vector<sim::NetworkLink> links;
  for (const std::string& name : networks) {
    SPARQ_ASSIGN_OR_RETURN(auto link, profile.network(name));
    links.push_back(link);
  }

  SPARQ_ASSIGN_OR_RETURN(auto base, train::load_train_config(config_path, sets));
  // config: what the training's MPI backend runs for comm.allreduce (ring: sparq's ring; auto:
  // the ring from comm's size threshold, MPI's own below it; mpi: MPI's own, approximated by
  // the cheapest algorithm).
  const std::string algorithm = args.allreduce == "config"
                                    ? sim::config_allreduce_algorithm(base.comm.allreduce)
                                    : args.allreduce;
  const std::string& gather_algorithm = args.gather;
  SPARQ_ASSIGN_OR_RETURN(auto layout, sim::build_layout(base));
  const std::int64_t seq_len = base.model.is_language_model() ? base.data.seq_len : 0;
  SPARQ_ASSIGN_OR_RETURN(auto compute,
                         sim::compute_times(*layout, profile, base.train.micro_batch, seq_len));
  if (!args.compute_ms.empty()) {
    // Measured totals of the run being predicted (its ranks may share cores, which the
    // profile's single-process timings do not see); the profile's per-layer split is kept.
    // The optimizer runs on the same cores, so a measured time replaces the profile's too.
    const double fwd = args.compute_ms[0], bwd = args.compute_ms[1];
    double total = 0;
    for (double t : compute.backward_s) total += t;
    if (!(total > 0)) {
      return Status::error(
          "--compute-ms: the profile's backward times sum to {} ms, so there "
          "is no split over the layers to scale to {} ms; measure the "
          "profile again (sim_profile)",
          total * 1e3, bwd);
    }
    for (double& t : compute.backward_s) t *= bwd / 1e3 / total;
    compute.forward_s = fwd / 1e3;
    if (args.compute_ms.size() == 3) compute.optimizer_s = args.compute_ms[2] / 1e3;
    compute.source += " (totals from --compute-ms)";
  }
  fmt::print("{}: {} parameters, {} buckets, micro_batch {} seq_len {}; compute from {} of "
             "profile {}: forward {:.2f} ms, backward {:.2f} ms, optimizer {:.2f} ms\n",
             base.model.spec, layout->store.param_count(), layout->plan->size(),
             base.train.micro_batch, seq_len, compute.source, profile.name,
             compute.forward_s * 1e3,
             sim::single_worker_step_ms({compute.forward_s, compute.backward_s, 0, {}}) -
                 compute.forward_s * 1e3,
             compute.optimizer_s * 1e3);

  // Per cell: its config and the step without, and (for a tied embedding) with the split;
  // which one a world size gets is resolve_tied_split()'s answer for it.
  struct CellInput {
    std::string name;
    train::TrainConfig config;
    sim::StepInput plain, split;
  };
  std::vector<CellInput> inputs;
  // Each cell is priced with its fixed plan (its config loaded with comm.plan: fixed, which
  // the dense cell needs: comm.plan: auto refuses compress.name: none). With comm.plan: auto,
  // every compressed cell also gets a "<cell>+auto" row: the plan choose_auto_plan() picks
  // for that world size and link, what train would choose at start-up, priced with this
  // command line's options (docs/simulate.md, "The automatic plan").
  const bool auto_plan =
      args.plan == "auto" || (args.plan == "config" && base.comm.plan_mode == "auto");
  if (auto_plan) {
    fmt::print(
        "comm.plan: auto: each compressed cell also gets a row <cell>+auto, the automatic "
        "plan for that world size and network (comm.plan_min_compression {}), with its "
        "buckets' strategies\n",
        base.comm.plan_min_compression);
  }
  for (const sim::Cell& cell : args.cells) {
    std::vector<std::string> overrides = cell.overrides;
    overrides.insert(overrides.end(), sets.begin(), sets.end());  // the user's keys win
    // Also under --plan fixed: a config's comm.plan: auto refuses the dense cell (review).
    if (base.comm.plan_mode == "auto") overrides.push_back("comm.plan=fixed");
    auto config = train::load_train_config(config_path, overrides);
    if (!config.is_ok()) return config.status().with_context("cell " + cell.name);
    CellInput in{cell.name, std::move(config).value(), {}, {}};
    for (bool split : {false, true}) {
      if (split && !layout->split_plan) continue;
      auto buckets = sim::simulate_buckets(*layout, in.config, profile, split);
      if (!buckets.is_ok()) return buckets.status().with_context("cell " + cell.name);
      (split ? in.split : in.plain) =
          sim::train_step_input(*layout, compute, std::move(buckets).value());
    }
    inputs.push_back(std::move(in));
  }

  std::vector<Row> rows;
  for (const sim::NetworkLink& link : links) {
    fmt::print("\nnetwork {}: alpha {} us, {} Gbit/s ({} allreduce, {} allgather/alltoall){}\n",
               link.name, link.alpha_us, link.gbps, algorithm, gather_algorithm,
               busy_comm_rate < 1 ? fmt::format(", communication at {} of its rate while "
                                                "backward computes", busy_comm_rate)
                                  : std::string());
    fmt::print("{:>6} {:<20} {:>10} {:>12} {:>12} {:>8}\n", "P", "cell", "step_ms", "exposed_ms",
               "MB_sent", "eff");
    for (int p : worlds) {
      for (const CellInput& cell : inputs) {
        SPARQ_ASSIGN_OR_RETURN(bool split, sim::uses_tied_split(*layout, cell.config, p));
        const sim::StepInput& input = split ? cell.split : cell.plain;
        sim::StepOptions options{
            .world_size = p,
            .link = {link.alpha_s(), link.beta_s_per_byte()},
            .allreduce = algorithm,
            .gather = gather_algorithm,
            // Local clipping holds every bucket until backward ends
            // (train::holds_buckets_for_local_norm, as the trainer).
            .overlap = base.comm.overlap && !train::holds_buckets_for_local_norm(cell.config),
            .busy_comm_rate = busy_comm_rate};
        Row row{link.name, cell.name, p, split, sim::simulate_step(input, options)};
        row.single_ms = sim::single_worker_step_ms(input);
        row.efficiency = row.single_ms / row.step.step_ms;  // (P / step_P) / (P / step_1)
        fmt::print("{:>6} {:<20} {:>10.2f} {:>12.2f} {:>12.2f} {:>8.3f}{}\n", p, cell.name,
                   row.step.step_ms, row.step.exposed_comm_ms, row.step.bytes_sent / 1e6,
                   row.efficiency, split ? "  tied split" : "");
        if (p == timeline_world) print_timeline(row.step);
        const double single_ms = row.single_ms;
        rows.push_back(std::move(row));
        if (auto_plan && !cell.config.compress.compress.compression_off()) {
          const sim::AutoPlanPricing pricing{.compute = compute,
                                             .allreduce = algorithm,
                                             .gather = gather_algorithm,
                                             .busy_comm_rate = busy_comm_rate};
          auto plan = sim::choose_auto_plan(*layout, cell.config, profile, link, p,
                                            base.comm.plan_min_compression, pricing);
          const std::string name = cell.name + "+auto";
          if (!plan.is_ok()) {
            fmt::print("{:>6} {:<20} no plan: {}\n", p, name, plan.status().message());
            continue;
          }
          Row chosen{link.name,
                     name,
                     p,
                     plan->tied_split,
                     plan->predicted,
                     single_ms,
                     single_ms / plan->predicted.step_ms};
          fmt::print("{:>6} {:<20} {:>10.2f} {:>12.2f} {:>12.2f} {:>8.3f}{}  {}\n", p, name,
                     chosen.step.step_ms, chosen.step.exposed_comm_ms, chosen.step.bytes_sent / 1e6,
                     chosen.efficiency, chosen.tied_split ? "  tied split" : "",
                     choice_summary(*plan));
          if (p == timeline_world) print_timeline(chosen.step);
          rows.push_back(std::move(chosen));
        }
      }
    }
  }
  if (!csv_path.empty()) {
    // Built whole, then written atomically (or through, to /dev/stdout or a pipe): a failed
    // write (a full disk, a file size limit) is reported and leaves an earlier CSV as it was
    // (found in review: an ofstream truncated it first and checked the stream before its last
    // flush).
    // `model` is the spec ("gpt2-tiny n_layer=6 n_embd=384"), not the preset: configs of one
    // preset with other sizes shared a label, and plot_scaling.py drew them as one curve
    // (review, 2026-12-06). Quoted when it holds a comma (a VGG layout=8,M,16,...).
    std::string model = base.model.spec;
    if (model.find_first_of(",\"") != std::string::npos) {
      std::string quoted = "\"";
      for (char ch : model) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      model = quoted + "\"";
    }
    std::string csv =
        "model,network,world,cell,step_ms,forward_ms,backward_ms,comm_end_ms,exposed_comm_ms,"
        "mb_sent_per_rank,single_worker_step_ms,efficiency,tied_split\n";
    for (const Row& r : rows)
      csv += fmt::format("{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{}\n",
                         model, r.network, r.world, r.cell, r.step.step_ms, r.step.forward_ms,
                         r.step.backward_ms, r.step.comm_end_ms, r.step.exposed_comm_ms,
                         r.step.bytes_sent / 1e6, r.single_ms, r.efficiency, r.tied_split ? 1 : 0);
    // The tables above leave stdio's buffer first: write_output_file writes with write(2), so
    // `--csv /dev/stdout | ...` printed the CSV before them (review, 2026-12-06).
    std::fflush(stdout);
    SPARQ_RETURN_IF_ERROR(
        write_output_file(csv_path, csv)
            .with_context(
                fmt::format("--csv {}: not written (an earlier file there is kept)", csv_path)));
    fmt::print("\nwrote {} rows to {}\n", rows.size(), csv_path);
  }
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sparq simulate: the alpha-beta model of a data-parallel step (docs/simulate.md)"};
  std::string config_path, profile_path, csv_path, allreduce = "config",
              gather = "best";
  std::string world = "2,4,8,16,32,64,128,256,512,1024";
  std::string cell_names;
  for (const auto& c : sparq::sim::cells()) cell_names += (cell_names.empty() ? "" : ",") + c.name;
  std::vector<std::string> sets, networks;
  int timeline_world = 0;
  app.add_option("--config", config_path, "training YAML config (docs/config.md)")->required();
  app.add_option("--set", sets, "override a config key: --set train.micro_batch=16 (repeatable)");
  app.add_option("--profile", profile_path, "machine profile YAML (profiles/)")->required();
  app.add_option("--network", networks, "a network of the profile (repeatable)")->required();
  app.add_option("--world", world, "comma-separated world sizes")->capture_default_str();
  app.add_option("--cells", cell_names, "comma-separated cells (docs/simulate.md)")
      ->capture_default_str();
  app.add_option("--csv", csv_path, "write every row to this CSV file");
  app.add_option("--allreduce", allreduce,
                 "allreduce cost: config (comm.allreduce ring: ring, auto: auto, mpi: best) | "
                 "ring | best | auto (ring from comm's size threshold, best below)")
      ->capture_default_str();
  app.add_option("--gather", gather,
                 "allgather/alltoall cost: best (MPI chooses by size) | ring (ring, pairwise)")
      ->capture_default_str();
  app.add_option("--buckets", timeline_world,
                 "print each bucket's ready, start and end time at this world size");
  std::string compute_ms;
  app.add_option("--compute-ms", compute_ms,
                 "FORWARD,BACKWARD[,OPTIMIZER]: use these measured totals (ms per micro-batch; "
                 "the optimizer's per step; forward and backward > 0, optimizer >= 0) instead "
                 "of the profile's, keeping its per-layer split (validation against runs whose "
                 "ranks share cores)");
  std::string plan = "config";
  app.add_option("--plan", plan,
                 "config (comm.plan's) | fixed | auto: auto adds a <cell>+auto row per compressed "
                 "cell, the automatic plan (docs/simulate.md)")
      ->capture_default_str();
  double busy_comm_rate = 1.0;
  app.add_option("--busy-comm-rate", busy_comm_rate,
                 "communication's rate while backward computes, relative to after it "
                 "(Note [Communication under compute], sim/step_model.h; measured for the "
                 "emulated cluster, whose ranks share the cores with the network)")
      ->capture_default_str();
  SPARQ_PARSE_ARGS(app, argc, argv);  // Note [App exit codes] (core/cli_args.h)
  // Checked here, not with CLI::Range, which lets NaN through to the step model's fatal
  // check (review, 2026-12-05); the range is the documented (0, 1].
  if (!(busy_comm_rate > 0 && busy_comm_rate <= 1)) {
    fmt::print(stderr, "simulate: --busy-comm-rate must be in (0, 1], got {}\n", busy_comm_rate);
    return 2;
  }
  // As --world and --cells refuse theirs: a repeated network printed its table twice and
  // wrote its CSV rows twice (review, 2026-12-07).
  if (const std::string twice = cli::first_repeated(networks); !twice.empty()) {
    fmt::print(stderr, "simulate: --network: '{}' is given twice\n", twice);
    return 2;
  }
  auto args = sim_app::check_arguments(world, cell_names, allreduce, gather, timeline_world,
                                       compute_ms, plan, sets);
  if (!args.is_ok()) {
    fmt::print(stderr, "simulate: {}\n", args.status().message());
    return 2;
  }
  const sparq::Status status =
      run(config_path, sets, profile_path, networks, *args, csv_path, busy_comm_rate);
  if (!status.is_ok()) {
    std::fprintf(stderr, "simulate: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
