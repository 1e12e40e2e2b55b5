// bench_models --device cuda: the GPU table (bench_models_gpu.h).
#include "bench_models_gpu.h"

#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "bench_models_child.h"
#include "bench_models_measure.h"

namespace sparq::bench {

// The GPU comparison: sparq fp32 and bf16 next to PyTorch fp32 and bf16 autocast, per model.
int run_gpu_table(const std::string& exe, const std::string& python, const std::string& script,
                  const std::string& models, int threads, int steps, int warmup, double peak_fp32,
                  double peak_bf16, bool no_torch) {
  fmt::print(
      "bench_models --device cuda: forward+backward on CUDA device 0, {} warm-up + {} "
      "timed steps, {} host thread(s); MFU against {} TFLOP/s fp32 and {} TFLOP/s bf16\n",
      warmup, steps, threads, peak_fp32, peak_bf16);
  // Rows print as they are measured, so a run cut short by a timeout keeps its finished rows.
  bool failed = false;  // a sparq child that measured nothing makes the run fail (exit 1)
  fmt::print(
      "|      | sparq fp32 |    MFU | torch fp32 |    MFU |    vs | sparq bf16 |    MFU | "
      "torch bf16 |    MFU |    vs | MiB s32 | MiB s16 | MiB t32 | MiB t16 |\n");
  fmt::print(
      "|------|------------|--------|------------|--------|-------|------------|--------|"
      "------------|--------|-------|---------|---------|---------|---------|\n");
  const auto mfu = [](double items_per_s, double flops, double peak) {
    return flops > 0 && items_per_s > 0
               ? fmt::format("{:.1f}%", 100 * items_per_s * flops / (peak * 1e12))
               : std::string("n/a");
  };
  for (const Workload& w : gpu_workloads()) {
    if (!listed(models, w.key)) continue;
    // --threads: the host threads of both sides (it was dropped on the GPU path: review).
    const std::string child =
        fmt::format("'{}' --child {} --device cuda --steps {} --warmup {} --threads {}", exe, w.key,
                    steps, warmup, threads);
    const Measurement ours = run_measured(child);
    // VGG's convolutions have no bf16 path (the trainer refuses it there).
    const Measurement ours16 =
        std::string(w.key) == "vgg" ? Measurement{} : run_measured(child + " --precision bf16");
    Measurement fp32, bf16;
    if (!no_torch) {
      const std::string base =
          fmt::format("'{}' '{}' --model {} --device cuda --steps {} --warmup {} --threads {}",
                      python, script, w.key, steps, warmup, threads);
      fp32 = run_measured(base + " --precision fp32");
      bf16 = run_measured(base + " --precision bf16");
    }
    const auto num = [](const Measurement& m, double v) {
      return m.ok ? fmt::format("{:.0f}", v) : std::string("n/a");
    };
    // The model's FLOPs per item, from whichever of sparq's runs reported them.
    const double f = ours.flops_per_item > 0 ? ours.flops_per_item : ours16.flops_per_item;
    const auto ratio = [](const Measurement& a, const Measurement& b) {
      return a.ok && b.ok ? fmt::format("{:.2f}", a.items_per_s / b.items_per_s)
                          : std::string("n/a");
    };
    const auto rate = [](const Measurement& m) { return m.ok ? m.items_per_s : 0.0; };
    fmt::print(
        "| {:<4} | {:>10} | {:>6} | {:>10} | {:>6} | {:>5} | {:>10} | {:>6} | "
        "{:>10} | {:>6} | {:>5} | {:>7} | {:>7} | {:>7} | {:>7} |\n",
        w.key, num(ours, ours.items_per_s), mfu(rate(ours), f, peak_fp32),
        num(fp32, fp32.items_per_s), mfu(rate(fp32), f, peak_fp32), ratio(ours, fp32),
        num(ours16, ours16.items_per_s), mfu(rate(ours16), f, peak_bf16),
        num(bf16, bf16.items_per_s), mfu(rate(bf16), f, peak_bf16), ratio(ours16, bf16),
        num(ours, ours.peak_rss_mib), num(ours16, ours16.peak_rss_mib),
        num(fp32, fp32.peak_rss_mib), num(bf16, bf16.peak_rss_mib));
    std::fflush(stdout);
    if (!ours.ok || (std::string(w.key) != "vgg" && !ours16.ok)) {
      fmt::print(stderr, "sparq run of {} failed\n", w.key);
      failed = true;
    }
  }
  fmt::print(
      "items/s (tokens, or images for vgg); vs = sparq / PyTorch at the same precision; "
      "sparq bf16 = bf16 GEMM operands, f32 activations (Note [bf16 GEMM operands]; none "
      "for vgg); torch: TF32 off, attention by scaled_dot_product_attention (its log says "
      "if it fell back); MiB = device memory held at the peak by sparq (s: device-wide use "
      "above its baseline) or torch (t: the caching allocator's peak reservation) in fp32 "
      "(32) or bf16 (16)\n");
  return failed ? 1 : 0;
}

}  // namespace sparq::bench
