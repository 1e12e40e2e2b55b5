// Runs engine_timeout_probe under mpirun as a subprocess: the timeout path must end every rank
// with a non-zero exit and a message naming the task, step and rank, within seconds (the
// outer `timeout` turns a hang into a distinct failure instead of blocking ctest). The
// success path checks that an MPI initialised by make_mpi_communicator is finalised cleanly.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <string>

namespace {

struct ProcessResult {
  int exit_code = -1;
  std::string output;
};

ProcessResult run_probe(int ranks, const std::string& mode) {
  const std::string command = std::string("timeout -k 5 60 ") + SPARQ_MPIEXEC + " -np " +
                              std::to_string(ranks) + " " + SPARQ_MPIRUN_FLAGS + " " +
                              SPARQ_TIMEOUT_PROBE + " " + mode + " 2>&1";
  ProcessResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed for: " << command;
    return result;
  }
  char chunk[4096];
  std::size_t n = 0;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) result.output.append(chunk, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

TEST(EngineTimeout, WithheldCollectiveAbortsTheJobWithAMessage) {
  for (int ranks : {2, 3}) {
    const ProcessResult r = run_probe(ranks, "withhold");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.exit_code, 124) << "the job hung until the outer timeout:\n" << r.output;
    const std::regex message(
        "CommEngine 'probe': task 'withheld allreduce' \\(step 7, #0\\) did not finish within "
        "1 s on rank [0-9]+ of " +
        std::to_string(ranks));
    EXPECT_TRUE(std::regex_search(r.output, message)) << r.output;
    EXPECT_EQ(r.output.find("outlived the timeout"), std::string::npos) << r.output;
  }
}

TEST(EngineTimeout, CompleteCollectiveExitsCleanly) {
  const ProcessResult r = run_probe(2, "ok");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("probe ok: sum 3"), std::string::npos) << r.output;
}

}  // namespace
