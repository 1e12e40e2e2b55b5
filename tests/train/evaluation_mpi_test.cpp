// Evaluation scores every item of the eval set exactly once, whatever the world size
// (sampler.h, pad_last_batch): an eval set smaller than train.eval_batches global batches is
// not scored twice, one smaller than a global batch still evaluates, and the padding rows
// count nothing. Each config is evaluated by all ranks together (micro_batch 2) and by every
// rank alone (micro_batch 1, no padding); the counts must be equal and so must the losses,
// to float summation order. lr 1e-30 (lr must be positive) leaves the parameters of the one
// training step the trainer runs the same at both world sizes, to far below that tolerance.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "core/file_io.h"
#include "core/tensor_copy.h"
#include "train/eval_sums.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

struct Case {
  const char* name;
  const char* yaml;
  bool same_parameters;  // false for VGG: its BatchNorm statistics follow the training batch
};

// 5 eval items in each: 5 windows of 16 tokens; 5 images; the BERT pieces of 81 tokens.
const Case kCases[] = {
    {"gpt2", R"(model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 1}
data: {source: markov, seq_len: 16, markov: {order: 1, train_tokens: 4096, eval_tokens: 81}}
optim: {name: sgd, lr: 1.0e-30}
train: {steps: 1, eval_batches: 16, seed: 3}
log: {progress_interval: 0})",
     true},
    {"bert", R"(model: {preset: bert-tiny, vocab_size: 256, n_ctx: 64}
data: {source: markov, seq_len: 32, markov: {train_tokens: 4096, eval_tokens: 81}}
optim: {name: sgd, lr: 1.0e-30}
train: {steps: 1, eval_batches: 16, seed: 3}
log: {progress_interval: 0})",
     true},
    {"vgg", R"(model: {preset: vgg-tiny}
data: {source: synthetic_images, synthetic: {train_images: 64, eval_images: 5}}
optim: {name: sgd, lr: 1.0e-30}
train: {steps: 1, eval_batches: 16, seed: 3}
log: {progress_interval: 0})",
     false},
};

EvalMetrics final_eval(const Case& c, comm::Communicator& comm, int micro_batch) {
  auto config =
      parse_train_config(c.yaml, c.name, {"train.micro_batch=" + std::to_string(micro_batch)});
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  auto trainer = Trainer::create(*config, comm);
  SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
  auto summary = (*trainer)->run();
  SPARQ_CHECK(summary.is_ok(), "{}", summary.status().message());
  return summary->eval;
}

TEST(EvaluationMpi, EveryEvalItemCountsOnceAtAnyWorldSize) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  auto alone = comm::make_self_communicator();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const EvalMetrics all = final_eval(c, **world, 2);
    const EvalMetrics one = final_eval(c, *alone, 1);
    ASSERT_GT(one.count, 0);
    EXPECT_EQ(all.count, one.count);
    const std::string name = c.name;
    if (name == "gpt2") {
      EXPECT_EQ(one.count, 5 * 16);
      EXPECT_GT(one.source_loss, 0.0);  // the order-1 source scores the next tokens
    } else if (name == "bert") {
      // Masked targets are not next tokens: no source reference (review: "-32.6% above it").
      EXPECT_EQ(one.source_loss, -1.0);
      EXPECT_EQ(all.source_loss, -1.0);
    } else if (name == "vgg") {
      EXPECT_EQ(one.count, 5);
    }
    EXPECT_TRUE(std::isfinite(all.loss));
    if (!c.same_parameters) continue;
    EXPECT_NEAR(all.loss, one.loss, 1e-5 * std::abs(one.loss));
    EXPECT_NEAR(all.accuracy, one.accuracy, 1e-6);
    EXPECT_NEAR(all.source_loss, one.source_loss, 1e-5 * std::abs(one.source_loss));
  }
}

// Note [Exact evaluation sums]: the world total is the ranks' sums added in rank order, the
// same bits on every rank, with counts exact past 2^24.
TEST(EvaluationMpi, WorldSumsAreTheRankOrderSumOnEveryRank) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& c = **world;
  // Values whose f64 sum depends on the order: 1e16, then small parts that it would swallow
  // in another grouping.
  const auto part = [](int r) {
    EvalSums s;
    s.add_batch(r == 0 ? 1e16 : 1.0 + 0.25 * r, (std::int64_t{1} << 24) + r, r);
    s.source_loss = r == 0 ? -1e16 : 0.5 * (r + 1);
    return s;
  };
  const EvalSums all = world_eval_sums(c, part(c.rank()));
  EvalSums expected;
  for (int r = 0; r < c.size(); ++r) {
    const EvalSums p = part(r);
    expected.loss += p.loss;
    expected.count += p.count;
    expected.correct += p.correct;
    expected.source_loss += p.source_loss;
  }
  EXPECT_EQ(all.loss, expected.loss);
  EXPECT_EQ(all.count, expected.count);
  EXPECT_EQ(all.correct, expected.correct);
  EXPECT_EQ(all.source_loss, expected.source_loss);
  // Every rank holds rank 0's bits.
  std::int64_t bits[2] = {std::bit_cast<std::int64_t>(all.loss),
                          std::bit_cast<std::int64_t>(all.source_loss)};
  std::int64_t root[2] = {bits[0], bits[1]};
  c.broadcast(root, 2, DType::kI64, 0);
  EXPECT_EQ(bits[0], root[0]);
  EXPECT_EQ(bits[1], root[1]);
}

// How many ranks hold model state other than rank 0's (collective).
int ranks_off_rank_zero(comm::Communicator& c, const std::vector<StateTensor>& state) {
  std::vector<float> mine, staging;
  for (const StateTensor& s : state) {
    const float* host = host_floats(s.tensor, staging);
    mine.insert(mine.end(), host, host + s.tensor.numel());
  }
  std::vector<float> root = mine;
  c.broadcast(root.data(), root.size(), DType::kF32, 0);
  std::int32_t off = mine == root ? 0 : 1, total = 0;
  c.allreduce(&off, &total, 1, DType::kI32, comm::ReduceOp::kSum);
  return total;
}

// Note [Model state follows rank 0]: each rank's batches move its BatchNorm statistics apart
// from the others'; an evaluation and a checkpoint first give every rank rank 0's (they
// evaluated and saved each rank's own: review, 2026-12-06).
TEST(EvaluationMpi, BatchNormStatisticsAreRankZerosForEvaluationsAndCheckpoints) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  comm::Communicator& c = **world;
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::string dir = ::testing::TempDir() + "/bn_state_" + std::to_string(c.size());
  auto config = parse_train_config(
      kCases[2].yaml, "vgg",
      {"train.micro_batch=2", "train.steps=4", "optim.lr=0.01", "train.checkpoint_dir=" + dir});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  if (c.rank() == 0) std::filesystem::remove_all(dir);  // an earlier run's steps
  c.barrier();
  for (const bool checkpoint : {false, true}) {
    SCOPED_TRACE(checkpoint ? "checkpoint" : "evaluation");
    auto trainer = Trainer::create(*config, c);
    ASSERT_TRUE(trainer.is_ok()) << trainer.status().message();
    Trainer& t = **trainer;
    ASSERT_TRUE(t.run(/*stop_at=*/2).is_ok());  // stopped early: no evaluation, no checkpoint
    ASSERT_FALSE(t.model_state().empty());
    ASSERT_EQ(ranks_off_rank_zero(c, t.model_state()), c.size() - 1);  // they drifted apart
    if (checkpoint) {
      ASSERT_TRUE(t.save_checkpoint().is_ok());
    } else {
      t.evaluate();
    }
    EXPECT_EQ(ranks_off_rank_zero(c, t.model_state()), 0);
  }
}

// An evaluation that scores no target (BERT rows with no masked token) reported loss 0 and
// accuracy 0%, a perfect model's loss (review, 2026-12-07): its loss is unknown, NaN here and
// null in the metrics file.
TEST(EvaluationMpi, AnEvaluationWithNoTargetHasNoLoss) {
  auto world = comm::make_mpi_communicator();
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  const std::string metrics = ::testing::TempDir() + "/no_target_eval.jsonl";
  auto config = parse_train_config(kCases[1].yaml, "bert",
                                   {"data.mask_prob=1e-6", "train.micro_batch=1",
                                    "train.eval_batches=2", "log.metrics=" + metrics});
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  auto trainer = Trainer::create(*config, **world);
  ASSERT_TRUE(trainer.is_ok()) << trainer.status().message();
  auto summary = (*trainer)->run();
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->eval.count, 0);
  EXPECT_TRUE(std::isnan(summary->eval.loss)) << summary->eval.loss;
  EXPECT_LT(summary->eval.accuracy, 0.0) << "an accuracy of nothing";
  if ((*world)->rank() != 0) return;
  const std::string records = *read_file(metrics);
  EXPECT_NE(records.find(R"({"event":"eval","step":1,"loss":null,"perplexity":null,)"
                         R"("accuracy":null,"count":0,)"),
            std::string::npos)
      << records;
}

}  // namespace
}  // namespace sparq::train
