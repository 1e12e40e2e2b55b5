// Note [Exact evaluation sums] (train/eval_sums.h) on one rank: counts past f32's 2^24 stay
// exact, and the loss of a batch is weighed by its counted targets in f64.
#include "train/eval_sums.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "comm/communicator.h"

namespace sparq::train {
namespace {

TEST(EvalSums, CountsPastTwoToTheTwentyFourAreExact) {
  EvalSums sums;
  constexpr std::int64_t kBig = std::int64_t{1} << 24;
  sums.add_batch(2.0, kBig, kBig - 1);
  sums.add_batch(2.0, 1, 1);  // an f32 running count would stay at 2^24 here
  EXPECT_EQ(sums.count, kBig + 1);
  EXPECT_EQ(sums.correct, kBig);
  EXPECT_EQ(sums.loss, 2.0 * static_cast<double>(kBig + 1));
}

TEST(EvalSums, ABatchWeighsByItsCountedTargets) {
  EvalSums sums;
  sums.add_batch(1.5, 4, 3);
  sums.add_batch(3.0, 0, 0);  // a padding batch counts nothing
  sums.add_batch(0.25, 8, 2);
  EXPECT_EQ(sums.count, 12);
  EXPECT_EQ(sums.correct, 5);
  EXPECT_DOUBLE_EQ(sums.loss, 1.5 * 4 + 0.25 * 8);
}

TEST(EvalSums, OneRankWorldTotalIsItsOwnSums) {
  auto self = comm::make_self_communicator();
  EvalSums mine;
  mine.add_batch(0.1, (std::int64_t{1} << 40) + 3, 7);
  mine.source_loss = 1e-17;
  const EvalSums all = world_eval_sums(*self, mine);
  EXPECT_EQ(all.loss, mine.loss);
  EXPECT_EQ(all.count, mine.count);
  EXPECT_EQ(all.correct, mine.correct);
  EXPECT_EQ(all.source_loss, mine.source_loss);
}

}  // namespace
}  // namespace sparq::train
