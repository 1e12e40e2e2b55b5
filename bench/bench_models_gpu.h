// bench_models --device cuda (bench_models.cpp): sparq fp32 and bf16 next to PyTorch fp32 and
// eager bf16 autocast, per GPU workload, with MFU and peak device memory; rows print as they
// are measured. Returns the exit status (1 when a sparq child measured nothing).
#pragma once

#include <string>

namespace sparq::bench {

int run_gpu_table(const std::string& exe, const std::string& python, const std::string& script,
                  const std::string& models, int threads, int steps, int warmup, double peak_fp32,
                  double peak_bf16, bool no_torch);

}  // namespace sparq::bench
