// The model golden tests on the GPU (label gpu; skipped without a device): the same checks
// as golden_test.cpp (golden_check.h) with the store, activations and batch on CUDA device 0.
// Bound: 1e-3 relative instead of the CPU's 1e-4, because cuBLAS and the device reductions
// sum in other orders than Eigen and the CPU loops; fp32 throughout (no TF32: the cuBLAS
// handle keeps the default math mode).
#include <gtest/gtest.h>

#include "common/device_test_util.h"
#include "models/golden_check.h"

namespace sparq {
namespace {

using testing::GoldenCase;

constexpr double kGpuRtol = 1e-3;

class CudaGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or built without CUDA): skipped";
    context_ = testing::test_cuda_context();
    ASSERT_NE(context_, nullptr);
  }
  void load(const std::string& file, GoldenCase* c) {
    c->rtol = kGpuRtol;
    testing::load_golden_case(file, *context_, c);
  }
  std::unique_ptr<ExecContext> context_;
};

TEST_F(CudaGolden, Gpt2MatchesPyTorch) {
  GoldenCase c;
  ASSERT_NO_FATAL_FAILURE(load("gpt2.golden", &c));
  testing::check_golden_phase(c, "train", true);
  testing::check_golden_trajectory(c);
}

TEST_F(CudaGolden, BertWithPaddingAndNspMatchesPyTorch) {
  GoldenCase c;
  ASSERT_NO_FATAL_FAILURE(load("bert.golden", &c));
  testing::check_golden_phase(c, "train", true);
  testing::check_golden_trajectory(c);
}

TEST_F(CudaGolden, VggTrainAndEvalMatchPyTorch) {
  GoldenCase c;
  ASSERT_NO_FATAL_FAILURE(load("vgg.golden", &c));
  testing::check_golden_phase(c, "train", true);
  testing::check_golden_phase(c, "eval", false);
  testing::check_golden_trajectory(c);
}

}  // namespace
}  // namespace sparq
