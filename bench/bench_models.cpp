// Forward + backward throughput of sparq's models on the CPU or one GPU, next to the same
// models in PyTorch (bench/bench_models_torch.py, the reference implementation the golden
// tests compare against), measured in the same invocation with the same thread count.
//
//   bench_models [--threads N] [--steps S] [--warmup W] [--rounds R]
//                [--models gpt2,bert,vgg,gpt2tiny]
//                [--python /usr/bin/python3] [--torch-blas DIR] [--torch-coretype NAME]
//                [--no-torch]
//                [--device cpu|cuda] [--profile]
//
// On the CPU the two sides of a model run in turn, --rounds times each (default 1; sparq first
// in even rounds, PyTorch first in odd ones), and the table's figures are over all their timed
// steps pooled; under the table each side's step time is printed as min / median / max with
// the range of the ratio those allow, so the noise is visible next to the ratio.
//
// On the CPU the language models also get their GEMM-peak bound: the model FLOPs of a step
// (6 N per token for the parameter GEMMs, N = all parameters, except that the tied head's
// table is counted for the rows and columns the head computes: sparq's fused CPU head runs
// only BERT's labelled rows (15%) and GPT-2's 50257 real columns, and so does the PyTorch
// peer; plus 12 L T d for attention; MFU on the GPU counts the same way, where the head is
// materialised on every row) over the FMA peak of the same thread count (bench/fma_peak.h, as
// bench_gemm measures it), as a fraction of the measured step time. Before 2026-12-06 the head
// was counted on every row, ~120 GFLOP a BERT step that never ran (review).
//
// --profile (CPU) also prints, per model, where sparq's timed steps went: self time per
// layer kind and phase (Note [Profile scopes], core/profile.h), in ms per step and as a share
// of the step; "other" is the rest (gradient zeroing, the models' glue).
//
// --device cuda runs the GPU workloads (GPT-2 124M B=16 T=1024, BERT-base B=32 T=128,
// VGG-16 B=128) on CUDA device 0, sparq in fp32 and (language models) with bf16 GEMM operands
// (Note [bf16 GEMM operands], core/cuda/mixed_gemm.h), next to PyTorch eager in fp32 and in
// bf16 autocast (TF32 off: both sides' fp32 is IEEE fp32); each step ends with a device
// synchronize; memory is the device memory held at its peak (sparq: device-wide use above the
// run's baseline; PyTorch: its caching allocator's peak reservation); MFU
// (language models) is the model FLOPs of a step, 6 N per token for the parameter GEMMs (N =
// all parameters, the tied head included: on CUDA both sides compute it on every row) plus
// 12 L T d for attention, over the step time
// and the device's dense peak (H100/H200 SXM datasheets: 67 TFLOP/s fp32, 989 TFLOP/s bf16;
// --peak-fp32/--peak-bf16 for other devices).
//
// Debian's python3-torch is built with BLAS_INFO=generic and so runs its matrix products on
// whatever libblas.so.3 the system selects, by default the single-threaded reference BLAS
// (a few GFLOP/s). --torch-blas puts DIR (e.g. an unpacked libopenblas0-pthread's
// .../openblas-pthread) first on the PyTorch child's LD_LIBRARY_PATH, so the reference
// runs on an optimised BLAS without changing the system's choice. --torch-coretype names the
// OpenBLAS kernels it runs (default: SkylakeX where the CPU has AVX-512 F/BW/DQ/VL; see
// torch_core_type) and the table's header says which ran.
//
// Each model runs in a child process of its own (this binary with --child, and the Python
// script), so every peak resident set size belongs to one model alone. A step is
// zero_grads + forward + backward; no optimizer. Both sides compute the same thing: on the
// CPU BERT's PyTorch peer gathers the labelled rows before the MLM decoder as sparq's fused
// head does, and GPT-2's peer multiplies by the table's 50257 real rows rather than cutting
// the padded product (review, 2026-12-06). Nothing here is asserted on.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_models_child.h"
#include "bench_models_gpu.h"
#include "bench_models_measure.h"
#include "core/cli_args.h"
#include "core/profile.h"
#include "core/threading.h"
#include "fma_peak.h"

namespace {

// Debian's OpenBLAS 0.3.21 runs its AVX2 Haswell kernels on AVX-512 AMD EPYCs (and that
// machine's environment sets OPENBLAS_CORETYPE=Haswell too), while sparq's GEMMs use AVX-512:
// a handicapped peer (review, 2026-12-05: SkylakeX kernels 1.3-1.6x faster on a 1024^3
// product there). Where the CPU has the subsets the SkylakeX kernels need, the PyTorch child
// gets them over any inherited OPENBLAS_CORETYPE; --torch-coretype chooses otherwise.
bool cpu_has_avx512_for_openblas() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

// The OpenBLAS core the PyTorch child is given ("" = the inherited environment's).
std::string torch_core_type(const std::string& chosen) {
  if (!chosen.empty()) return chosen;
  return cpu_has_avx512_for_openblas() ? "SkylakeX" : "";
}

using namespace sparq;
using bench::listed;
using bench::Measurement;
using bench::pool;
using bench::run_measured;
using bench::Workload;

// The --profile table of one model: self time per layer kind and phase, per timed step.
void print_profile(const std::string& model, const Measurement& m, int steps) {
  if (m.profile.empty()) return;
  const double step_ms = m.step_s * 1e3;
  double covered = 0;
  fmt::print("\nprofile of sparq {} ({:.1f} ms per step):\n", model, step_ms);
  fmt::print("| {:<34} | {:>10} | {:>6} | {:>9} |\n", "layer kind.phase", "ms / step", "share",
             "calls");
  fmt::print("|{:-<36}|{:-<12}|{:-<8}|{:-<11}|\n", "", "", "", "");
  for (const profile::Row& r : m.profile) {
    const double ms = r.seconds * 1e3 / steps;
    covered += ms;
    fmt::print("| {:<34} | {:>10.1f} | {:>5.1f}% | {:>9} |\n", r.name, ms, 100 * ms / step_ms,
               r.calls / steps);
  }
  const double other = std::max(0.0, step_ms - covered);
  fmt::print("| {:<34} | {:>10.1f} | {:>5.1f}% | {:>9} |\n", "other", other, 100 * other / step_ms,
             "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sparq models vs PyTorch: forward + backward throughput on the CPU"};
  // 2 untimed steps (first-touch page faults, allocator growth, cuDNN's algorithm search) and
  // the median of 5 timed ones (review, 2026-12-05: 1 + the mean of 3 let one disturbed step
  // move a row by tens of percent on a shared machine).
  int threads = 2, steps = 5, warmup = 2, rounds = 1;
  std::string models = "gpt2,bert,vgg", python = "/usr/bin/python3", child, torch_blas, torch_core;
  bool no_torch = false;
  app.add_option("--threads", threads, "OpenMP / torch threads")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "timed steps per model")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--rounds", rounds,
                 "CPU: run sparq's and PyTorch's child in turn this many times each, steps "
                 "pooled")
      ->check(CLI::PositiveNumber);
  app.add_option("--models", models,
                 "comma list of gpt2, bert, vgg, gpt2tiny (GPT-2 tiny, vocab 50257)");
  app.add_option("--python", python, "interpreter with torch for the reference");
  app.add_option("--torch-blas", torch_blas, "folder with a libblas.so.3 for the PyTorch child");
  app.add_option("--torch-coretype", torch_core,
                 "OPENBLAS_CORETYPE of the PyTorch child (default: SkylakeX on a CPU with "
                 "AVX-512 F/BW/DQ/VL, else the inherited one)");
  app.add_flag("--no-torch", no_torch, "skip the PyTorch reference");
  std::string device = "cpu";
  double peak_fp32 = 67, peak_bf16 = 989;  // H100/H200 SXM dense (NVIDIA datasheets)
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  // 0 printed an MFU of inf%, a negative one a negative MFU (review, 2026-12-07).
  app.add_option("--peak-fp32", peak_fp32, "device fp32 peak TFLOP/s for MFU")
      ->check(CLI::PositiveNumber);
  app.add_option("--peak-bf16", peak_bf16, "device bf16 dense peak TFLOP/s for MFU")
      ->check(CLI::PositiveNumber);
  bool profiled = false;
  app.add_flag("--profile", profiled, "print sparq's time per layer kind (CPU)");
  app.add_option("--child", child, "internal: run one workload and print RESULT");
  std::string precision = "fp32";
  app.add_option("--precision", precision, "internal (a cuda child): fp32 or bf16 GEMM operands")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  SPARQ_PARSE_ARGS(app, argc, argv);  // Note [App exit codes], Note [Decimal integers]
  set_num_threads(threads);

  if (!child.empty()) {
    const bool cuda = device == "cuda";
    const bool bf16 = precision == "bf16";
    for (const Workload& w : cuda ? bench::gpu_workloads() : bench::cpu_workloads()) {
      if (child == w.key) return bench::run_child(w, steps, warmup, cuda, profiled && !cuda, bf16);
    }
    fmt::print(stderr, "unknown workload '{}' (gpt2, bert, vgg, gpt2tiny)\n", child);
    return 2;
  }

  // An unknown key printed an empty table and exited 0 (review, 2026-12-06; checked
  // before either table).
  {
    std::stringstream keys(models);
    for (std::string key; std::getline(keys, key, ',');) {
      bool known = false;
      for (const Workload& w : device == "cuda" ? bench::gpu_workloads() : bench::cpu_workloads())
        known = known || key == w.key;
      if (!known) {
        fmt::print(stderr,
                   "bench_models: --models: unknown model '{}' (gpt2, bert, vgg, gpt2tiny)\n", key);
        return 2;
      }
    }
  }
  // The children are this same binary: find it through /proc.
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) {
    fmt::print(stderr, "cannot locate this executable\n");
    return 1;
  }
  exe[len] = '\0';
  const std::string script = std::string(SPARQ_BENCH_SOURCE_DIR) + "/bench/bench_models_torch.py";
  if (device == "cuda") {
    return bench::run_gpu_table(exe, python, script, models, threads, steps, warmup, peak_fp32,
                                peak_bf16, no_torch);
  }

  torch_core = torch_core_type(torch_core);
  const char* inherited = std::getenv("OPENBLAS_CORETYPE");
  fmt::print(
      "bench_models: forward+backward, {} thread(s), {} round(s) of {} warm-up + {} timed "
      "steps per side (sparq and PyTorch in turn), PyTorch BLAS: {}, OpenBLAS core {}\n",
      threads, rounds, warmup, steps, torch_blas.empty() ? "system libblas.so.3" : torch_blas,
      !torch_core.empty()    ? torch_core
      : inherited != nullptr ? std::string(inherited) + " (inherited)"
                             : std::string("OpenBLAS's own choice"));
  std::vector<std::string> rows;
  bool failed = false;  // a sparq child that measured nothing makes the run fail (exit 1)
  std::vector<std::pair<std::string, Measurement>> profiles, peak_bounds;
  std::vector<std::string> spreads;
  std::set<std::string> torch_blases;  // as each PyTorch child loaded it
  // The FMA peak before and after the children, the higher kept (as bench_gemm does): one
  // reading on a shared machine is often low, and a low one put a bound above 100%.
  const double peak_before = bench::measure_fma_peak_gflops(threads);
  for (const Workload& w : bench::cpu_workloads()) {
    if (!listed(models, w.key)) continue;
    const std::string env = fmt::format("OMP_NUM_THREADS={} ", threads);
    const std::string sparq_command =
        env + fmt::format("'{}' --child {} --threads {} --steps {} --warmup {}{}", exe, w.key,
                          threads, steps, warmup, profiled ? " --profile" : "");
    const std::string blas =
        (torch_blas.empty()
             ? std::string()
             : fmt::format("LD_LIBRARY_PATH='{}'${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} "
                           "OPENBLAS_NUM_THREADS={} ",
                           torch_blas, threads)) +
        (torch_core.empty() ? std::string() : fmt::format("OPENBLAS_CORETYPE='{}' ", torch_core));
    const std::string torch_command =
        env + blas +
        fmt::format("'{}' '{}' --model {} --threads {} --steps {} --warmup {}", python, script,
                    w.key, threads, steps, warmup);
    // The two sides in turn (review, 2026-12-06: sparq then PyTorch once each put any drift
    // of a shared machine into the ratio), neither always first.
    std::vector<Measurement> our_rounds, torch_rounds;
    for (int round = 0; round < rounds; ++round) {
      const bool torch_first = round % 2 == 1 && !no_torch;
      if (torch_first) torch_rounds.push_back(run_measured(torch_command));
      our_rounds.push_back(run_measured(sparq_command));
      if (!no_torch && !torch_first) torch_rounds.push_back(run_measured(torch_command));
    }
    const Measurement ours = pool(our_rounds);
    if (profiled) profiles.emplace_back(w.key, ours);
    if (ours.ok && ours.flops_per_item > 0) peak_bounds.emplace_back(w.key, ours);
    const Measurement torch = no_torch ? Measurement{} : pool(torch_rounds);
    for (const Measurement& r : torch_rounds) {
      if (r.ok)
        torch_blases.insert(r.blas.empty() ? std::string("unknown (not reported)") : r.blas);
    }
    const auto spread = [](const Measurement& m) {
      return m.ok ? fmt::format("{:.3f} / {:.3f} / {:.3f} s", m.best_step_s, m.step_s,
                                m.worst_step_s)
                  : std::string("n/a");
    };
    std::string line =
        fmt::format("  {:<8} sparq {}, PyTorch {}", w.key, spread(ours), spread(torch));
    if (ours.ok && torch.ok) {
      line += fmt::format("; ratio {:.2f} to {:.2f}", torch.best_step_s / ours.worst_step_s,
                          torch.worst_step_s / ours.best_step_s);
    }
    spreads.push_back(line);
    const char* unit = w.seq > 0 ? "tokens/s" : "images/s";
    const std::string shape =
        w.seq > 0 ? fmt::format("B={} T={}", w.batch, w.seq) : fmt::format("B={}", w.batch);
    const auto ratio = [&](double a, double b) {
      return torch.ok && ours.ok ? fmt::format("{:.2f}", a / b) : std::string("n/a");
    };
    rows.push_back(fmt::format(
        "| {:<10} | {:<11} | {:>9} | {:>10} | {:>10} | {:>6} | {:>6} | {:>10} | {:>10} |",
        std::string(w.spec).substr(0, std::string(w.spec).find(' ')), shape, unit,
        ours.ok ? fmt::format("{:.1f}", ours.items_per_s) : std::string("n/a"),
        torch.ok ? fmt::format("{:.1f}", torch.items_per_s) : std::string("n/a"),
        ratio(ours.items_per_s, torch.items_per_s), ratio(torch.best_step_s, ours.best_step_s),
        ours.ok ? fmt::format("{:.0f}", ours.peak_rss_mib) : std::string("n/a"),
        torch.ok ? fmt::format("{:.0f}", torch.peak_rss_mib) : std::string("n/a")));
    if (!ours.ok) {
      fmt::print(stderr, "sparq run of {} failed\n", w.key);
      failed = true;
    }
  }
  fmt::print(
      "| model      | shape       | unit      |      sparq |    PyTorch |  ratio |   best | sparq "
      "MiB  | torch MiB  |\n");
  fmt::print(
      "|------------|-------------|-----------|------------|------------|--------|--------|--------"
      "----|------------|\n");
  for (const auto& row : rows) fmt::print("{}\n", row);
  fmt::print(
      "ratio = sparq / PyTorch throughput at each side's median step, best = the same "
      "for each side's fastest step (higher is better); MiB = peak resident set of the "
      "process running that model alone, above its resident set before the model was "
      "built (the interpreter and libraries left out on both sides)\n");
  fmt::print(
      "\nstep time min / median / max over {} timed step(s) per side ({} round(s)); ratio "
      "range = sparq / PyTorch throughput from sparq's slowest against PyTorch's fastest step "
      "to sparq's fastest against PyTorch's slowest:\n",
      rounds * steps, rounds);
  for (const auto& line : spreads) fmt::print("{}\n", line);
  // What PyTorch ran on, read by each child from its own maps (bench/torch_blas.py): the
  // header says what was asked for, this what was loaded (review, 2026-12-07: on the
  // reference BLAS the ratios came out 7x too kind under a header naming OpenBLAS).
  for (const std::string& blas : torch_blases) {
    fmt::print("PyTorch's BLAS, as loaded: {}\n", blas);
    if (blas.starts_with("reference") || blas.starts_with("unknown")) {
      const std::string warning = fmt::format(
          "WARNING: PyTorch ran on {}: its times are not its real speed and the ratios above "
          "are not comparisons; install libopenblas0-pthread or pass --torch-blas DIR",
          blas.starts_with("reference") ? "the reference BLAS" : "an unidentified BLAS");
      fmt::print("{}\n", warning);
      fmt::print(stderr, "{}\n", warning);
      failed = true;
    }
  }
  if (!peak_bounds.empty()) {
    const double peak_after = bench::measure_fma_peak_gflops(threads);
    const double peak = std::max(peak_before, peak_after);
    fmt::print(
        "\nGEMM-peak bound (model FLOPs of a step / FMA peak {:.1f} GFLOP/s on {} thread(s), "
        "the higher of {:.1f} before and {:.1f} after the runs):\n",
        peak, threads, peak_before, peak_after);
    fmt::print(
        "  (model FLOPs: 6 per parameter per token, the tied head's table counted for the "
        "rows and columns the fused head computes: BERT's labelled 15%, GPT-2's 50257 "
        "real columns; + 12 L T d for attention)\n");
    for (const auto& [key, m] : peak_bounds) {
      const double step_gflop = m.flops_per_item * m.items_per_s * m.step_s * 1e-9;
      fmt::print(
          "  {}: {:.1f} GFLOP a step, bound {:.2f} s, measured {:.2f} s (best {:.2f} s): "
          "{:.0f}% of the bound ({:.0f}% best)\n",
          key, step_gflop, step_gflop / peak, m.step_s, m.best_step_s,
          100 * step_gflop / peak / m.step_s, 100 * step_gflop / peak / m.best_step_s);
    }
  }
  for (const auto& [key, m] : profiles) print_profile(key, m, steps);
  return failed ? 1 : 0;
}
