// Forward + backward throughput of sparq's models on the CPU, next to the same models in
// PyTorch (bench/bench_models_torch.py, the reference implementation the golden tests
// compare against), measured in the same invocation with the same thread count.
//
//   bench_models [--threads N] [--steps S] [--warmup W] [--models gpt2,bert,vgg]
//                [--python /usr/bin/python3] [--torch-blas DIR] [--no-torch]
//
// Debian's python3-torch is built with BLAS_INFO=generic and so runs its matrix products on
// whatever libblas.so.3 the system selects, by default the single-threaded reference BLAS
// (a few GFLOP/s). --torch-blas puts DIR (e.g. an unpacked libopenblas0-pthread's
// .../openblas-pthread) first on the PyTorch child's LD_LIBRARY_PATH, so the reference
// runs on an optimised BLAS without changing the system's choice.
//
// Each model runs in a child process of its own (this binary with --child, and the Python
// script), so every peak resident set size belongs to one model alone. A step is
// zero_grads + forward + backward; no optimizer. Nothing here is asserted on.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/rng.h"
#include "core/threading.h"
#include "core/timer.h"
#include "models/model.h"

namespace {

using namespace sparq;

// The benchmark's workloads (issue 4): spec, micro-batch, sequence length.
struct Workload {
  const char* key;
  const char* spec;
  std::int64_t batch, seq;
};
// BERT runs without dropout because the PyTorch reference has none; MLM labels on 15%.
const Workload kWorkloads[] = {
    {"gpt2", "gpt2-124M", 4, 256},
    {"bert", "bert-base dropout=0 attn_dropout=0", 8, 128},
    {"vgg", "vgg16", 32, 0},
};

struct Measurement {
  double items_per_s = 0;  // tokens or images
  double peak_rss_mib = 0;
  double step_s = 0;       // mean over the timed steps
  double best_step_s = 0;  // fastest timed step: the least disturbed by other processes
  bool ok = false;
};

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// Runs one workload in this process and prints
// "RESULT <items/s> <peak MiB> <mean s/step> <fastest s/step>".
int run_child(const Workload& w, int steps, int warmup) {
  auto config = parse_model_spec(w.spec);
  if (!config) {
    fmt::print(stderr, "{}\n", config.status().message());
    return 1;
  }
  auto made = make_model(config.value(), {w.batch, w.seq});
  if (!made) {
    fmt::print(stderr, "{}\n", made.status().message());
    return 1;
  }
  Model& model = *made.value();
  ParamStore store;
  model.declare(store);
  store.allocate();
  store.initialize(1234);
  model.bind(store);  // make_model has logged the parameter count and activation memory

  // Synthetic inputs: uniform tokens (15% MLM labels for BERT), Gaussian images.
  const ModelConfig& c = model.config();
  const std::int64_t rows = w.batch * std::max<std::int64_t>(w.seq, 1);
  std::vector<std::int32_t> tokens(rows), targets(rows), labels(w.batch);
  std::vector<float> images;
  Rng rng(99, 1);
  Batch batch;
  if (c.is_language_model()) {
    for (std::int64_t i = 0; i < rows; ++i) {
      tokens[i] = static_cast<std::int32_t>(rng.below(c.vocab_size));
      const bool labelled = c.arch == ModelArch::kGpt2 || rng.uniform() < 0.15f;
      targets[i] = labelled ? static_cast<std::int32_t>(rng.below(c.vocab_size)) : kIgnoreIndex;
    }
    batch.tokens = Tensor(tokens.data(), DType::kI32, {w.batch, w.seq});
    batch.targets = Tensor(targets.data(), DType::kI32, {w.batch, w.seq});
  } else {
    images.resize(w.batch * c.in_channels * c.image_size * c.image_size);
    fill_normal(images.data(), images.size(), 0.0f, 1.0f, 7, 3);
    for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(c.num_classes));
    batch.images = Tensor(images.data(), DType::kF32,
                          {w.batch, c.in_channels, c.image_size, c.image_size});
    batch.labels = Tensor(labels.data(), DType::kI32, {w.batch});
  }

  double seconds = 0, best = 1e30;
  for (int step = 0; step < warmup + steps; ++step) {
    Stopwatch sw;
    store.zero_grads();
    model.set_step(step);
    const float loss = model.forward(batch);
    model.backward();
    if (step >= warmup) {
      seconds += sw.seconds();
      best = std::min(best, sw.seconds());
    }
    fmt::print(stderr, "  {} step {}: loss {:.4f}, {:.2f} s\n", w.key, step, loss, sw.seconds());
  }
  const double items = static_cast<double>(w.batch * (c.is_language_model() ? w.seq : 1)) * steps;
  fmt::print("RESULT {} {} {} {}\n", items / seconds, peak_rss_mib(), seconds / steps, best);
  return 0;
}

// Runs a command, passes its stderr through, and parses the RESULT line of its stdout.
Measurement run_measured(const std::string& command) {
  Measurement m;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return m;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe.get()) != nullptr) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "RESULT") {
      m.ok = static_cast<bool>(in >> m.items_per_s >> m.peak_rss_mib >> m.step_s >> m.best_step_s);
    } else {
      std::fputs(line, stderr);  // the child's log (e.g. the model summary)
    }
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sparq models vs PyTorch: forward + backward throughput on the CPU"};
  int threads = 2, steps = 3, warmup = 1;
  std::string models = "gpt2,bert,vgg", python = "/usr/bin/python3", child, torch_blas;
  bool no_torch = false;
  app.add_option("--threads", threads, "OpenMP / torch threads")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "timed steps per model")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--models", models, "comma list of gpt2, bert, vgg");
  app.add_option("--python", python, "interpreter with torch for the reference");
  app.add_option("--torch-blas", torch_blas, "folder with a libblas.so.3 for the PyTorch child");
  app.add_flag("--no-torch", no_torch, "skip the PyTorch reference");
  app.add_option("--child", child, "internal: run one workload and print RESULT");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);

  if (!child.empty()) {
    for (const Workload& w : kWorkloads) {
      if (child == w.key) return run_child(w, steps, warmup);
    }
    fmt::print(stderr, "unknown workload '{}' (gpt2, bert, vgg)\n", child);
    return 2;
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

  fmt::print("bench_models: forward+backward, {} thread(s), {} warm-up + {} timed steps, "
             "PyTorch BLAS: {}\n",
             threads, warmup, steps, torch_blas.empty() ? "system libblas.so.3" : torch_blas);
  std::vector<std::string> rows;
  for (const Workload& w : kWorkloads) {
    if (models.find(w.key) == std::string::npos) continue;
    const std::string env = fmt::format("OMP_NUM_THREADS={} ", threads);
    const Measurement ours = run_measured(env + fmt::format("'{}' --child {} --threads {} --steps {} --warmup {}",
                                                            exe, w.key, threads, steps, warmup));
    Measurement torch;
    if (!no_torch) {
      const std::string blas =
          torch_blas.empty() ? std::string()
                             : fmt::format("LD_LIBRARY_PATH='{}' OPENBLAS_NUM_THREADS={} ",
                                           torch_blas, threads);
      torch = run_measured(env + blas + fmt::format("'{}' '{}' --model {} --threads {} --steps {} --warmup {}",
                                             python, script, w.key, threads, steps, warmup));
    }
    const char* unit = w.seq > 0 ? "tokens/s" : "images/s";
    const std::string shape =
        w.seq > 0 ? fmt::format("B={} T={}", w.batch, w.seq) : fmt::format("B={}", w.batch);
    const auto ratio = [&](double a, double b) {
      return torch.ok && ours.ok ? fmt::format("{:.2f}", a / b) : std::string("n/a");
    };
    rows.push_back(fmt::format(
        "| {:<10} | {:<11} | {:>9} | {:>10.1f} | {:>10} | {:>6} | {:>6} | {:>10.0f} | {:>10} |",
        std::string(w.spec).substr(0, std::string(w.spec).find(' ')), shape, unit,
        ours.ok ? ours.items_per_s : 0.0,
        torch.ok ? fmt::format("{:.1f}", torch.items_per_s) : std::string("n/a"),
        ratio(ours.items_per_s, torch.items_per_s), ratio(torch.best_step_s, ours.best_step_s),
        ours.ok ? ours.peak_rss_mib : 0.0,
        torch.ok ? fmt::format("{:.0f}", torch.peak_rss_mib) : std::string("n/a")));
    if (!ours.ok) fmt::print(stderr, "sparq run of {} failed\n", w.key);
  }
  fmt::print("| model      | shape       | unit      |      sparq |    PyTorch |  ratio |   best | sparq MiB  | torch MiB  |\n");
  fmt::print("|------------|-------------|-----------|------------|------------|--------|--------|------------|------------|\n");
  for (const auto& row : rows) fmt::print("{}\n", row);
  fmt::print("ratio = sparq / PyTorch mean throughput, best = the same for each side's fastest "
             "step (higher is better); MiB = peak resident set of the process running that model "
             "alone\n");
  return 0;
}
