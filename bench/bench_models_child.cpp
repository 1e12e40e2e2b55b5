// bench_models' child: one workload in this process (bench_models_child.h).
#include "bench_models_child.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "core/exec_context.h"
#include "core/ops.h"
#include "core/profile.h"
#include "core/rng.h"
#include "core/tensor_copy.h"
#include "core/timer.h"
#include "models/model.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sparq::bench {
namespace {

// BERT runs without dropout because the PyTorch reference has none; MLM labels on 15%
// (exactly round(0.15 B T) positions, as bench_models_torch.py labels).
const Workload kWorkloads[] = {
    {"gpt2", "gpt2-124M", 4, 256},
    {"bert", "bert-base dropout=0 attn_dropout=0", 8, 128},
    {"vgg", "vgg16", 32, 0},
    // Issue 18's one-thread case: a small model whose step is dominated by the LM head and
    // cross-entropy over GPT-2's full 50257-token vocabulary (K = n_embd = 128).
    {"gpt2tiny", "gpt2-tiny vocab_size=50257", 8, 128},
};
// The GPU shapes (issue 14); bench_models_torch.py's GPU_WORKLOADS match them.
const Workload kGpuWorkloads[] = {
    {"gpt2", "gpt2-124M", 16, 1024},
    {"bert", "bert-base dropout=0 attn_dropout=0", 32, 128},
    {"vgg", "vgg16", 128, 0},
};

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// The resident set now (MiB), from /proc/self/statm (its second field, in pages); 0 if
// unreadable.
double current_rss_mib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
                         (1 << 20)
                   : 0;
}

// Device memory in use now (MiB), for the peak of a GPU child; 0 on the CPU.
double device_used_mib(bool cuda) {
#if SPARQ_HAS_CUDA
  std::size_t free = 0, total = 0;
  if (cuda && cudaMemGetInfo(&free, &total) == cudaSuccess) {
    return static_cast<double>(total - free) / (1 << 20);
  }
#endif
  return 0;
}

// A host tensor's twin in device memory owned by `storage`.
Tensor upload(const Tensor& host, Buffer& storage) {
  storage = Buffer::device(host.nbytes());
  Tensor device(storage.data(), host.dtype(), host.shape(), Device::kCUDA);
  copy_from_host(host.raw(), device);
  return device;
}

// Model FLOPs of one token of a language model's training step (see the header), counting
// the tied head's product for the rows and columns it computes: 6 per parameter, except the
// embedding table's 6 V C, which is counted as 6 C per head column for `head_rows` of every
// `rows` (the fused CPU head: the labelled rows, BERT's 15%, and the valid_vocab columns; the
// materialised head: every row and the padded table), plus 12 L T d for attention. 0 for VGG.
double flops_per_item(const Model& model, std::int64_t params, std::int64_t seq,
                      std::int64_t head_rows, std::int64_t rows) {
  const ModelConfig& c = model.config();
  if (!c.is_language_model()) return 0;
  const double dim = static_cast<double>(c.n_embd);
  const double table = static_cast<double>(c.padded_vocab()) * dim;
  const double columns = static_cast<double>(model.fused_head() ? c.vocab_size : c.padded_vocab());
  const double head = columns * dim * static_cast<double>(head_rows) / static_cast<double>(rows);
  return 6.0 * (static_cast<double>(params) - table + head) +
         12.0 * static_cast<double>(c.n_layer) * static_cast<double>(seq) * dim;
}

}  // namespace

std::span<const Workload> cpu_workloads() { return kWorkloads; }
std::span<const Workload> gpu_workloads() { return kGpuWorkloads; }

int run_child(const Workload& w, int steps, int warmup, bool cuda, bool profiled, bool bf16) {
  std::unique_ptr<ExecContext> gpu;
  if (cuda) {
    auto ctx = ExecContext::create_cuda(0, bf16 ? GemmPrecision::kBF16 : GemmPrecision::kF32);
    if (!ctx.is_ok()) {
      fmt::print(stderr, "{}\n", ctx.status().message());
      return 1;
    }
    gpu = std::move(ctx).value();
  }
  const ExecContext& context = gpu ? *gpu : ExecContext::cpu();
  const double baseline_mib = device_used_mib(cuda);
  // The process before the model: what the peak is measured above on the CPU, as
  // bench_models_torch.py measures PyTorch's above its interpreter and libraries.
  const double baseline_rss_mib = current_rss_mib();
  auto config = parse_model_spec(w.spec);
  if (!config) {
    fmt::print(stderr, "{}\n", config.status().message());
    return 1;
  }
  auto made = make_model(config.value(), {w.batch, w.seq, context.device()});
  if (!made) {
    fmt::print(stderr, "{}\n", made.status().message());
    return 1;
  }
  Model& model = *made.value();
  ParamStore store;
  model.declare(store);
  store.allocate(context);
  store.initialize(1234);
  model.bind(store);  // make_model has logged the parameter count and activation memory

  // Synthetic inputs: uniform tokens, Gaussian images. BERT labels exactly round(0.15 rows)
  // positions, chosen at random, as bench_models_torch.py does: both heads get the same
  // number of rows (until 2026-12-06 a 15% coin per position gave each side its own count).
  const ModelConfig& c = model.config();
  const std::int64_t rows = w.batch * std::max<std::int64_t>(w.seq, 1);
  std::vector<std::int32_t> tokens(rows), targets(rows), labels(w.batch);
  std::vector<float> images;
  Rng rng(99, 1);
  Batch batch;
  std::int64_t labelled = rows;  // rows with a target: what the fused head computes
  if (c.is_language_model()) {
    for (std::int64_t i = 0; i < rows; ++i) {
      tokens[i] = static_cast<std::int32_t>(rng.below(c.vocab_size));
      targets[i] = static_cast<std::int32_t>(rng.below(c.vocab_size));
    }
    if (c.arch == ModelArch::kBert) {
      labelled = std::llround(0.15 * static_cast<double>(rows));
      std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
      for (std::int64_t i = 0; i < rows; ++i) order[i] = i;
      for (std::int64_t i = 0; i < labelled; ++i) {  // partial Fisher-Yates: the first `labelled`
        const std::int64_t j = i + static_cast<std::int64_t>(rng.below(rows - i));
        std::swap(order[i], order[j]);
      }
      for (std::int64_t i = labelled; i < rows; ++i) targets[order[i]] = kIgnoreIndex;
      fmt::print(stderr, "  {}: MLM head on {} of {} rows ({} labelled)\n", w.key,
                 model.fused_head() ? labelled : rows, rows, labelled);
    }
    batch.tokens = Tensor(tokens.data(), DType::kI32, {w.batch, w.seq});
    batch.targets = Tensor(targets.data(), DType::kI32, {w.batch, w.seq});
  } else {
    images.resize(w.batch * c.in_channels * c.image_size * c.image_size);
    fill_normal(images.data(), images.size(), 0.0f, 1.0f, 7, 3);
    for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(c.num_classes));
    batch.images =
        Tensor(images.data(), DType::kF32, {w.batch, c.in_channels, c.image_size, c.image_size});
    batch.labels = Tensor(labels.data(), DType::kI32, {w.batch});
  }

  Buffer device_fields[4];
  if (cuda) {
    const Tensor* fields[4] = {&batch.tokens, &batch.targets, &batch.images, &batch.labels};
    Tensor* out[4] = {&batch.tokens, &batch.targets, &batch.images, &batch.labels};
    for (int i = 0; i < 4; ++i) {
      if (!fields[i]->empty()) *out[i] = upload(*fields[i], device_fields[i]);
    }
  }

  std::vector<double> timed;  // seconds of each timed step
  double peak_device_mib = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    if (profiled && step == warmup) profile::set_enabled(true);
    Stopwatch sw;
    store.zero_grads();
    model.set_step(step);
    const float loss = model.forward_for_backward(batch);
    model.backward();
    context.synchronize();
    peak_device_mib = std::max(peak_device_mib, device_used_mib(cuda) - baseline_mib);
    if (step >= warmup) timed.push_back(sw.seconds());
    fmt::print(stderr, "  {} step {}: loss {:.4f}, {:.2f} s\n", w.key, step, loss, sw.seconds());
  }
  profile::set_enabled(false);
  for (const profile::Row& row : profile::rows()) {
    fmt::print("PROFILE {} {} {}\n", row.name, row.seconds, row.calls);
  }
  fmt::print("STEPS {}\n", fmt::join(timed, " "));  // every timed step, for the parent's spread
  // The median step: one disturbed step (another process, a page-fault burst) moves it
  // less than the mean; bench_models_torch.py reports the same.
  std::sort(timed.begin(), timed.end());
  const std::size_t n = timed.size();
  const double median = n % 2 == 1 ? timed[n / 2] : 0.5 * (timed[n / 2 - 1] + timed[n / 2]);
  const double items = static_cast<double>(w.batch * (c.is_language_model() ? w.seq : 1));
  fmt::print("RESULT {} {} {} {} {}\n", items / median,
             cuda ? peak_device_mib : peak_rss_mib() - baseline_rss_mib, median, timed.front(),
             flops_per_item(model, store.param_count(), w.seq, model.fused_head() ? labelled : rows,
                            rows));
  return 0;
}

}  // namespace sparq::bench
