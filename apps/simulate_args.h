// simulate's command-line values that need no config or profile (apps/simulate.cpp), checked
// before any file is read so that a bad one exits 2 (Note [App exit codes], core/cli_args.h;
// they exited 1 after the work had begun: review, 2026-12-06).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "sim/workload.h"

namespace sparq::sim_app {

struct Arguments {
  std::vector<int> worlds;
  std::vector<sim::Cell> cells;
  std::string allreduce;  // config | ring | best | auto
  std::string gather;     // collectives.h: ring | best
  int timeline_world = 0;
  std::string plan;  // config | fixed | auto
  // --compute-ms FORWARD,BACKWARD[,OPTIMIZER], when given.
  std::vector<double> compute_ms;
};

// --world, --cells, --allreduce, --gather, --buckets, --compute-ms, --plan and every --set
// (its syntax, and no cell's own keys: the compressor and the aggregation).
Result<Arguments> check_arguments(const std::string& world_text, const std::string& cells_text,
                                  const std::string& allreduce, const std::string& gather,
                                  int timeline_world, const std::string& compute_ms,
                                  const std::string& plan, const std::vector<std::string>& sets);

}  // namespace sparq::sim_app
