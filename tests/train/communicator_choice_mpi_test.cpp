// comm.backend: auto in a program that initialised MPI itself (mpi_test_main.cpp does) but
// whose launcher sparq does not recognise: MPI is chosen, not a single process per rank
// (before 2026-12-06 only the launchers' environment variables counted; review).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "train/run.h"

namespace sparq::train {
namespace {

TEST(CommunicatorChoice, AutoTakesMpiThatTheProgramInitialised) {
  // Hide the launcher: what is left is MPI initialised by this program.
  std::map<std::string, std::string> saved;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (const char* value = std::getenv(v)) saved[v] = value;
    ::unsetenv(v);
  }
  CommConfig config;
  config.backend = "auto";
  auto comm = make_communicator(config);
  for (const auto& [name, value] : saved) ::setenv(name.c_str(), value.c_str(), 1);
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  EXPECT_EQ((*comm)->backend(), "mpi");
  EXPECT_EQ((*comm)->size(), 2);
}

}  // namespace
}  // namespace sparq::train
