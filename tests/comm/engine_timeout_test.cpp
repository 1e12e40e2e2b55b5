// Runs engine_timeout_probe under mpirun as a subprocess: the timeout path must end every rank
// (the withholding one included, which waits to be killed) with a non-zero exit and a message
// naming the task, step and rank, and saying the collective was running (the outer `timeout`
// turns a job the abort did not end into a distinct failure instead of blocking ctest). The
// success path checks that an MPI initialised by make_mpi_communicator is finalised cleanly.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "common/subprocess.h"

namespace {

using sparq::testing::ProcessResult;

ProcessResult run_probe(int ranks, const std::string& mode) {
  return sparq::testing::run_command(std::string("timeout -k 5 40 ") + SPARQ_MPIEXEC + " -np " +
                                     std::to_string(ranks) + " " + SPARQ_MPIRUN_FLAGS + " " +
                                     SPARQ_TIMEOUT_PROBE + " " + mode + " 2>&1");
}

TEST(EngineTimeout, WithheldCollectiveAbortsTheJobWithAMessage) {
  for (int ranks : {2, 3}) {
    const ProcessResult r = run_probe(ranks, "withhold");
    EXPECT_NE(r.exit_code, 0) << r.output;
    // 124: the outer timeout ended it; 137: its KILL did (review, 2026-12-05: a job that
    // only died of the KILL passed). Two probes of at most 45 s fit ctest's 120 s.
    EXPECT_NE(r.exit_code, 124) << "the job hung until the outer timeout:\n" << r.output;
    EXPECT_NE(r.exit_code, 137) << "the job hung until the outer timeout's KILL:\n" << r.output;
    const std::regex message(
        "CommEngine 'probe': task 'withheld allreduce' \\(step 7, #0\\) did not finish within "
        "1 s on rank [0-9]+ of " +
        std::to_string(ranks) + "; it has been running for");
    EXPECT_TRUE(std::regex_search(r.output, message)) << r.output;
  }
}

TEST(EngineTimeout, CompleteCollectiveExitsCleanly) {
  const ProcessResult r = run_probe(2, "ok");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("probe ok: sum 3"), std::string::npos) << r.output;
}

}  // namespace
