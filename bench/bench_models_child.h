// bench_models' workloads, and one workload's run in a process of its own (the parent,
// bench_models.cpp, starts this same binary with --child for each, so that every peak memory
// figure belongs to one model alone).
#pragma once

#include <cstdint>
#include <span>

namespace sparq::bench {

// The benchmark's workloads (issue 4): spec, micro-batch, sequence length.
struct Workload {
  const char* key;
  const char* spec;
  std::int64_t batch, seq;
};

std::span<const Workload> cpu_workloads();  // the CPU table's shapes
std::span<const Workload> gpu_workloads();  // --device cuda's shapes

// Runs one workload in this process: zero_grads + forward + backward for `warmup` untimed and
// `steps` timed steps, on the CPU or CUDA device 0 (GEMM operands in bf16 when `bf16`), and
// prints "STEPS <s/step of each timed step>" and then
// "RESULT <items/s> <peak MiB> <median s/step> <fastest s/step> <FLOPs per item>" on
// stdout (FLOPs: the tied head counted on the rows and columns it computes, see
// bench_models.cpp); with `profiled` (CPU) first one "PROFILE <name> <seconds> <calls>" line
// per scope.
// Returns the process exit code.
int run_child(const Workload& w, int steps, int warmup, bool cuda, bool profiled, bool bf16);

}  // namespace sparq::bench
