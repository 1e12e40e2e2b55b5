// comm.plan: auto through run_training() on 2 MPI ranks (sim/auto_plan.h): with a profile
// whose codec is slow (1 MB/s) on a fast link, every compressed bucket is predicted faster
// dense and the run sends dense; a minimum compression ratio keeps enough buckets compressed;
// errors name the key. Every rank trains the same plan (the trainer compares the choices).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "comm/mpi_communicator.h"
#include "small_run_config.h"
#include "train/run.h"

namespace sparq::train {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(AutoPlanMpi, ChoosesPerBucketThroughRunTraining) {
  auto comm = comm::make_mpi_communicator().value();
  ASSERT_EQ(comm->size(), 2);
  // One file for both ranks (the config, plan_profile included, must be the same): rank 0
  // writes it before either reads.
  const std::string profile = ::testing::TempDir() + "sparq_auto_plan_profile.yaml";
  if (comm->rank() == 0) {
    std::ofstream out(profile);
    out << "name: auto-plan-test\nsource: made up\ncompute:\n  flops: {matmul_tflops: 0.1, "
           "memory_gbps: 10, optimizer_ns_per_param: 1}\ncodecs:\n  lbs: {encode_gbps: 0.001, "
           "decode_gbps: 0.001}\nnetworks:\n  - {name: lan, alpha_us: 50, gbps: 10}\n";
  }
  comm->barrier();
  TrainConfig c = testing::small_markov_run(2);
  c.compress.compress = {"lbs", {{"density", "0.01"}}, "compress.lbs"};
  c.comm.plan.first_bucket_mb = 0.25;
  c.comm.plan.bucket_mb = 1;
  c.comm.plan_mode = "auto";
  c.comm.plan_profile = profile;
  c.comm.plan_network = "lan";

  auto all_dense = run_training(c, *comm);
  ASSERT_TRUE(all_dense.is_ok()) << all_dense.status().message();
  EXPECT_NEAR(all_dense->compression_ratio, 1.0, 0.05) << "expected every bucket dense";

  c.comm.plan_min_compression = 4;
  auto constrained = run_training(c, *comm);
  ASSERT_TRUE(constrained.is_ok()) << constrained.status().message();
  EXPECT_GE(constrained->compression_ratio, 4.0);

  c.comm.plan_network = "wan";
  auto refused = run_training(c, *comm);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_TRUE(contains(refused.status().message(), "no network 'wan' (it has: lan)"))
      << refused.status().message();
  c.comm.plan_network = "";
  auto missing = validate_train_config(c);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(contains(missing.status().message(), "comm.plan_network: needed by comm.plan: auto"))
      << missing.status().message();
  comm->barrier();
  if (comm->rank() == 0) std::filesystem::remove(profile);
}

}  // namespace
}  // namespace sparq::train
