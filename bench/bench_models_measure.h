// How bench_models measures a side: one child process (sparq's --child, or the PyTorch
// script) run and its RESULT/STEPS/PROFILE lines parsed, and one side's rounds pooled.
#pragma once

#include <string>
#include <vector>

#include "core/profile.h"

namespace sparq::bench {

struct Measurement {
  double items_per_s = 0;     // tokens or images
  double peak_rss_mib = 0;    // peak device memory for a GPU run
  double step_s = 0;          // median of the timed steps
  double best_step_s = 0;     // fastest timed step: the least disturbed by other processes
  double flops_per_item = 0;  // sparq's children only
  double worst_step_s = 0;    // slowest timed step
  std::vector<double> steps;  // every timed step (the children's STEPS line), pooled over rounds
  std::vector<profile::Row> profile;  // --profile: totals over the timed steps
  std::string blas;  // the PyTorch child's "BLAS <kind> <path>" (bench/torch_blas.py)
  bool ok = false;
};

double median_of(std::vector<double> v);

// One side's rounds as one measurement: the timed steps pooled, the median, fastest and
// slowest step over them, the highest peak; the profile of the first round.
Measurement pool(const std::vector<Measurement>& rounds);

// Whether `key` is an item of the comma-separated list (so "gpt2" does not pick "gpt2tiny").
bool listed(const std::string& list, const std::string& key);

// Runs a command, passes its stderr through, and parses the RESULT line of its stdout; not ok
// when the child printed no RESULT or exited with a status other than 0.
Measurement run_measured(const std::string& command);

}  // namespace sparq::bench
