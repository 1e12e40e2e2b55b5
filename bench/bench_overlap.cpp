// bench_overlap: what wait-free backprop buys. For gpt2-tiny (synthetic Markov text) and
// vgg-tiny (synthetic images), with compression none, fp16 and lbs (top-1% + 4-bit, error
// feedback), it trains the same configuration twice in one run: with the WFBP scheduler
// overlapping each bucket's exchange with the rest of backward, and with overlap disabled
// (every bucket sent after backward ends, the baseline), over a link emulated at 1 Gbit/s
// (comm/emulated_link.h; --gbps 0 uses the raw shared-memory link). It prints the mean step time,
// exposed communication (wait after backward), hidden fraction, and bytes per step of both,
// and the ratio of step times (baseline / overlapped: > 1 means overlap helps). The two
// variants alternate in blocks so that machine noise hits both alike. Nothing is asserted.
//
//   mpirun -np 2 build/bench/bench_overlap [steps] [--gbps G]
//
// The figures are the slowest rank's means over the measured steps (after warm-up); the
// hidden fraction is the lowest rank's. A timeline of one step is what `train` with
// log.trace draws (docs/comm.md); this bench takes no --trace (it drove steps one at a time,
// which records none: review, 2026-12-06).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/emulated_link.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace {

using namespace sparq;

struct BenchModel {
  const char* name;
  const char* yaml;
};

// Bucket caps are small so that even these tiny models have several buckets to overlap.
const BenchModel kModels[] = {
    {"gpt2-tiny", R"(
model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64}
data: {source: markov, seq_len: 64,
       markov: {vocab_size: 256, order: 1, branching: 4, train_tokens: 262144, eval_tokens: 8192}}
optim: {name: adamw, lr: 1.0e-3}
compress: {name: none, lbs: {density: 0.01, bits: 4}}
comm: {first_bucket_mb: 0.25, bucket_mb: 0.5, dense_patterns: ["*.bias", "*ln_*"]}
train: {steps: 1000000, micro_batch: 8}
log: {progress_interval: 0}
)"},
    {"vgg-tiny", R"(
model: {preset: vgg-tiny}
data: {source: synthetic_images, synthetic: {train_images: 4096, eval_images: 256}}
optim: {name: sgd, lr: 0.05, momentum: 0.9}
compress: {name: none, lbs: {density: 0.01, bits: 4}}
comm: {first_bucket_mb: 0.02, bucket_mb: 0.05, dense_patterns: ["*.bias", "*bn*"]}
train: {steps: 1000000, micro_batch: 32}
log: {progress_interval: 0}
)"},
};

struct Figures {
  double step_ms = 0, exposed_ms = 0, hidden = 0, bytes = 0;
  int steps = 0;
  void add(const train::StepMetrics& m) {
    step_ms += m.result.step_ms;
    exposed_ms += m.result.comm.exposed_ms;
    hidden += m.result.comm.hidden_fraction();
    bytes += static_cast<double>(m.result.comm.bytes_sent);
    ++steps;
  }
};

std::unique_ptr<train::Trainer> make(comm::Communicator& comm, const BenchModel& model,
                                     const std::string& compressor, bool overlap,
                                     const comm::EmulatedLink& link) {
  std::vector<std::string> sets = {"compress.name=" + compressor,
                                   std::string("comm.overlap=") + (overlap ? "true" : "false")};
  // The trainer checks that the config names the link its communicator emulates (every run
  // failed without these: review, 2026-12-06).
  if (link.enabled()) {
    sets.push_back(fmt::format("comm.emulate.gbit_per_s={}", link.gbit_per_s));
    sets.push_back(fmt::format("comm.emulate.latency_us={}", link.latency_us));
  }
  auto config = train::parse_train_config(model.yaml, model.name, sets);
  if (!config.is_ok()) {
    fmt::print(stderr, "bench_overlap: {}\n", config.status().message());
    std::exit(1);
  }
  auto t = train::Trainer::create(*config, comm);
  if (!t.is_ok()) {
    fmt::print(stderr, "bench_overlap: {}\n", t.status().message());
    std::exit(1);
  }
  return std::move(t).value();
}

// The slowest rank's value (what a synchronous job waits for), or the lowest.
double slowest(comm::Communicator& comm, double v, bool lowest = false) {
  float x = static_cast<float>(v);
  std::vector<float> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(&x, all.data(), 1, DType::kF32);
  return lowest ? *std::min_element(all.begin(), all.end())
                : *std::max_element(all.begin(), all.end());
}

// A whole number >= 1, or -1.
int whole_number(const std::string& text) {
  if (text.empty() || text.size() > 9 ||
      !std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return -1;
  }
  const int v = std::atoi(text.c_str());
  return v >= 1 ? v : -1;
}

}  // namespace

int main(int argc, char** argv) {
  auto c = comm::make_mpi_communicator(&argc, &argv);
  if (!c.is_ok()) {
    fmt::print(stderr, "bench_overlap: {}\n", c.status().message());
    return 1;
  }
  int steps = 30;
  comm::EmulatedLink link{.gbit_per_s = 1.0, .latency_us = 50};
  // Strict: a typo or a missing value was taken as the step count (review, 2026-12-06).
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string bad;
    if (a == "--gbps") {
      char* end = nullptr;
      const double g = i + 1 < argc ? std::strtod(argv[i + 1], &end) : -1;
      if (i + 1 >= argc || end == argv[i + 1] || *end != '\0' || !(g >= 0 && g < 1e6)) {
        bad = "--gbps needs a rate in Gbit/s, >= 0 (0: the raw link)";
      } else {
        link.gbit_per_s = g;
        ++i;
      }
    } else if (whole_number(a) > 0) {
      steps = std::max(4, whole_number(a));
    } else {
      bad = fmt::format("unknown argument '{}' (usage: bench_overlap [steps] [--gbps G])", a);
    }
    if (!bad.empty()) {
      fmt::print(stderr, "bench_overlap: {}\n", bad);
      return 2;
    }
  }
  std::unique_ptr<comm::Communicator> owned = std::move(c).value();
  if (link.gbit_per_s == 0) link = {};  // the raw link: no latency added either
  if (link.enabled()) owned = comm::make_emulated_link(std::move(owned), link);
  comm::Communicator& comm = *owned;
  const bool root = comm.rank() == 0;
  if (root) {
    fmt::print("bench_overlap: {} ranks, link emulated at {} Gbit/s + {} us per call (--gbps 0: "
               "the raw link), {} measured steps per variant (after 3 warm-up steps)\n"
               "{:<10} {:<6} | {:>9} {:>11} {:>7} | {:>9} {:>11} | {:>11} | {:>10}\n",
               comm.size(), link.gbit_per_s, link.latency_us, steps, "model", "comp", "step ms", "exposed ms", "hidden",
               "no-ovl ms", "exposed ms", "ratio", "KiB/step");
  }
  for (const BenchModel& model : kModels) {
    for (const char* compressor : {"none", "fp16", "lbs"}) {
      auto overlapped = make(comm, model, compressor, true, link);
      auto baseline = make(comm, model, compressor, false, link);
      for (int w = 0; w < 3; ++w) {
        overlapped->train_step();
        baseline->train_step();
      }
      Figures on, off;
      constexpr int kBlock = 5;  // alternate in blocks so load changes hit both variants
      for (int done = 0; done < steps; done += kBlock) {
        for (int i = 0; i < kBlock && done + i < steps; ++i) on.add(overlapped->train_step());
        for (int i = 0; i < kBlock && done + i < steps; ++i) off.add(baseline->train_step());
      }
      const double n = on.steps;
      const double on_ms = slowest(comm, on.step_ms / n), off_ms = slowest(comm, off.step_ms / n);
      const double on_exposed = slowest(comm, on.exposed_ms / n);
      const double off_exposed = slowest(comm, off.exposed_ms / n);
      const double hidden = slowest(comm, on.hidden / n, /*lowest=*/true);
      if (root) {
        fmt::print("{:<10} {:<6} | {:>9.2f} {:>11.2f} {:>6.0f}% | {:>9.2f} {:>11.2f} | {:>10.3f}x "
                   "| {:>10.1f}\n",
                   model.name, compressor, on_ms, on_exposed, 100 * hidden, off_ms, off_exposed,
                   off_ms / on_ms, on.bytes / n / 1024.0);
      }
    }
  }
  if (root) {
    fmt::print("step ms / exposed ms: overlapped (WFBP); no-ovl: communicate after backward;\n"
               "ratio = no-ovl / overlapped step time; hidden = share of exchange time that ran "
               "before backward ended; KiB/step: this rank's bytes on the wire\n");
  }
  return 0;
}
