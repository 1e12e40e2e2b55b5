// BatchStager (train/batch_staging.h) on the GPU: every field of a staged batch holds the host
// batch's bytes on the device, the slot's buffers are reused (and grown) across stages, and the
// staged batch carries the host's count of counted targets, so that weighing micro-batches
// reads nothing back (Note [Token-weighted micro-batches], train/data_parallel.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/device_test_util.h"
#include "core/tensor_copy.h"
#include "train/batch_staging.h"

namespace sparq::train {
namespace {

std::vector<std::int32_t> device_ints(const Tensor& t) {
  std::vector<std::int32_t> host(static_cast<std::size_t>(t.numel()));
  copy_to_host(t, host.data());
  return host;
}

TEST(CudaBatchStaging, StagedFieldsEqualTheHostBatchAndCarryTheTargetCount) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  BatchStager stager(*ctx, 2);
  // Two sizes through one slot: the second is larger, so the slot's buffers grow.
  for (const std::int64_t rows : {3, 7}) {
    SCOPED_TRACE(rows);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows * 5)), targets(tokens.size());
    std::int64_t counted = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<std::int32_t>(i * 7 % 101);
      targets[i] = i % 3 == 0 ? static_cast<std::int32_t>(i) : kIgnoreIndex;
      counted += targets[i] != kIgnoreIndex;
    }
    Batch host;
    host.tokens = Tensor(tokens.data(), DType::kI32, {rows, 5});
    host.targets = Tensor(targets.data(), DType::kI32, {rows, 5});
    const Batch staged = stager.stage(host, 1);
    ASSERT_EQ(staged.tokens.device(), Device::kCUDA);
    EXPECT_EQ(device_ints(staged.tokens), tokens);
    EXPECT_EQ(device_ints(staged.targets), targets);
    EXPECT_TRUE(staged.images.empty());
    EXPECT_EQ(staged.counted_targets, counted);
    // A count the host batch knows already is carried, not recounted.
    host.counted_targets = 2;
    EXPECT_EQ(stager.stage(host, 0).counted_targets, 2);
  }
}

}  // namespace
}  // namespace sparq::train
