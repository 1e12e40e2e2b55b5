// Helpers for the tests that drive apps/train as a subprocess (train_app_test.cpp and its
// splits train_app_refusal_test.cpp, train_app_overlap_test.cpp, elastic_resume_test.cpp,
// checkpoint_fault_app_test.cpp): the mpirun command line, scratch directories, and reading the
// JSONL metrics a run writes. The targets that include this define SPARQ_SOURCE_DIR, SPARQ_MPIEXEC,
// SPARQ_MPIRUN_FLAGS and SPARQ_TRAIN_APP.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace sparq::testing {

// How run_train starts the job, beyond its ranks and arguments.
struct TrainLaunch {
  int timeout_s = 600;       // `timeout` bounds the job, so a hang fails instead of blocking
  std::string fault{};       // SPARQ_FAULT for every rank (core/fault.h), when not empty
  std::string rank_wrapper{};  // a shell prefix run before each rank (a ulimit), when not empty
};

// Runs `train` with `args` from the source directory, under mpirun with `ranks` processes
// (0: a single process without mpirun), one OpenMP thread per rank; stderr is captured too.
inline ProcessResult run_train(int ranks, const std::string& args, const TrainLaunch& launch = {}) {
  std::string command = "cd " + std::string(SPARQ_SOURCE_DIR) + " && ";
  if (!launch.fault.empty()) command += "SPARQ_FAULT='" + launch.fault + "' ";
  command += "timeout -k 5 " + std::to_string(launch.timeout_s) + " ";
  if (ranks > 0) {
    command += std::string(SPARQ_MPIEXEC) + " -np " + std::to_string(ranks) + " " +
               SPARQ_MPIRUN_FLAGS + " -x OMP_NUM_THREADS=1 -x OMPI_MCA_mpi_yield_when_idle=1 ";
    if (!launch.fault.empty()) command += "-x SPARQ_FAULT ";
  }
  if (!launch.rank_wrapper.empty()) {
    command += "bash -c '" + launch.rank_wrapper + "; exec \"$0\" \"$@\"' ";
  }
  return run_command(command + SPARQ_TRAIN_APP + " " + args + " 2>&1");
}

// A refusal: exit status 1 and the message in the output.
inline void expect_refused(const ProcessResult& r, const std::string& message) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << "expected: " << message << "\n"
                                                       << r.output;
}

// A fresh scratch directory per test and process: <tmp>/sparq_<prefix>_<name>_<pid>.
inline std::filesystem::path scratch_dir(const std::string& prefix, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("sparq_" + prefix + "_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A JSON field's raw text from one flat JSONL record ("" when absent).
inline std::string field(const std::string& record, const std::string& key) {
  const std::regex re("\"" + key + "\":(\"[^\"]*\"|[^,}]*)");
  std::smatch m;
  return std::regex_search(record, m, re) ? m[1].str() : "";
}

// The records of one event kind, in order.
inline std::vector<std::string> events(const std::vector<std::string>& lines,
                                       const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& l : lines) {
    if (field(l, "event") == "\"" + kind + "\"") out.push_back(l);
  }
  return out;
}

// The arguments of a small, fast variant of the default config, 10 steps (lbs with error
// feedback, so the residual and compressor state must survive the checkpoint too), with its
// checkpoints every 4 steps in <dir>/<name>_ckpt and its metrics in <dir>/<name>.jsonl.
inline std::string small_default_run(const std::filesystem::path& dir, const std::string& name) {
  return "--config configs/default.yaml --set train.steps=10 --set model.n_layer=2 "
         "--set optim.warmup_steps=2 "
         "--set train.eval_interval=0 --set train.eval_batches=2 --set log.progress_interval=0 "
         "--set train.checkpoint_interval=4 --set train.checkpoint_dir=" +
         (dir / (name + "_ckpt")).string() +
         " --set log.metrics=" + (dir / (name + ".jsonl")).string();
}

}  // namespace sparq::testing
