// Note [Non-finite local gradients] on the GPU (DeviceNonfiniteGuard, label gpu; skipped
// without a device): the train app on one GPU with lbs (error feedback), blockquant (none) and
// dense buckets (compress.name none), its local gradient made NaN at step index 3 by the fault
// point gradient.nonfinite (a subprocess, since fault points read SPARQ_FAULT once per process).
// The step is skipped, the run goes on to finite parameters and losses, and the warning names the
// rank and the bucket, as on the CPU (train_app_test.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "common/device_test_util.h"
#include "common/subprocess.h"

namespace sparq::train {
namespace {

TEST(CudaNonfinite, ANonFiniteLocalGradientSkipsTheStepOnTheGpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  const std::filesystem::path metrics =
      std::filesystem::temp_directory_path() / "sparq_cuda_nonfinite.jsonl";
  std::filesystem::remove(metrics);
  // With error feedback the guard reads the exchange's ||g + e||^2; without, and for a dense
  // bucket, it makes a pass.
  for (const auto& [compressor, feedback] :
       {std::pair{"lbs", "true"}, {"blockquant", "false"}, {"none", "false"}}) {
    SCOPED_TRACE(std::string(compressor) + " error_feedback " + feedback);
    const std::string command =
        std::string("cd ") + SPARQ_SOURCE_DIR +
        " && SPARQ_FAULT=gradient.nonfinite,step=3,action=fail timeout -k 5 300 " +
        SPARQ_TRAIN_APP +
        " --config configs/default.yaml --set train.device=cuda --set train.steps=8"
        " --set model.n_layer=2 --set train.eval_interval=0 --set train.eval_batches=2"
        " --set log.progress_interval=0 --set compress.name=" +
        compressor + " --set compress.error_feedback=" + feedback +
        " --set log.metrics=" + metrics.string() + " 2>&1";
    const testing::ProcessResult r = testing::run_command(command);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("(1 skipped)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("step 4: rank 0: non-finite local gradient in bucket"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("loss nan"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("parameters checksum"), std::string::npos) << r.output;
    std::filesystem::remove(metrics);
  }
}

}  // namespace
}  // namespace sparq::train
