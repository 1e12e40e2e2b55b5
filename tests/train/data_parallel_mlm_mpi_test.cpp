// Note [Token-weighted micro-batches] (data_parallel.h) across ranks and micro-batches: BERT's
// gradient and its logged loss weigh micro-batches by their masked tokens.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm_engine.h"
#include "comm/mpi_communicator.h"
#include "comm/wfbp_scheduler.h"
#include "core/rng.h"
#include "data_parallel_test_util.h"
#include "models/model.h"
#include "train/data_parallel.h"

namespace sparq::train {
namespace {

using testing_dp::dense_average;
using testing_dp::GlobalBatch;
using testing_dp::make_global_batch;
using testing_dp::Run;
using testing_dp::slice;

// Note [Token-weighted micro-batches] (data_parallel.h): a BERT micro-batch's MLM loss is a
// mean over its masked positions, and their number varies. Here micro-batches of two rows
// alternate between masking about 7 and about 1 of every 16 positions, so weighing the
// micro-batches equally moves the gradient far beyond rounding (~100%). One SGD step without
// dropout, with the batch split over ranks, over micro-batches or both, must give the
// gradient (as the averager leaves it) and update of one worker with the whole batch.
GlobalBatch make_mlm_batch(const ModelConfig& mc, std::int64_t rows, std::int64_t t) {
  GlobalBatch g = make_global_batch(mc, rows, t, 0);
  const std::uint64_t stream = make_stream(RngPurpose::kData, 0, 7);
  for (std::int64_t i = 0; i < rows * t; ++i) {
    const std::uint32_t masked = (i / t / 2) % 2 == 0 ? 7 : 1;  // of 16 positions
    if (random_u32_at(97, stream, i) % 16 >= masked) g.targets[i] = kIgnoreIndex;
  }
  for (std::int64_t r = 0; r < rows; ++r) g.labels.push_back(r % 2);  // the NSP labels
  return g;
}

struct MlmStep {
  std::vector<float> grad, update;  // the aggregate gradient; parameters after - before
  float loss = 0;                   // the step's logged loss (StepResult::loss)
};

// One step of rows [first, first + rows) of g in `micro` micro-batches, on `c`.
MlmStep mlm_step(const ModelConfig& mc, comm::Communicator& c, GlobalBatch& g, std::int64_t first,
                 std::int64_t rows, std::int64_t micro, std::int64_t t) {
  const std::int64_t b = rows / micro;
  struct Run run(mc, {b, t}, {.name = "sgd"});  // "struct": Run alone is gtest's Test::Run
  MlmStep out;
  out.grad.assign(static_cast<std::size_t>(run.store.flat_numel()), 0.0f);
  comm::CommEngine engine(c, comm::CommEngine::Options{});
  comm::FunctionAverager averager(
      [&, average = dense_average(run.store)](comm::Communicator& cm, const comm::Bucket& bucket,
                                              std::int64_t step) {
        const Status s = average(cm, bucket, step);
        std::copy_n(run.store.grads() + bucket.range.offset, bucket.range.count,
                    out.grad.begin() + bucket.range.offset);
        return s;
      });
  comm::WfbpScheduler sched(*run.plan, engine, averager);
  const optim::LrSchedule schedule(optim::LrScheduleConfig{.lr = 1.0});
  DataParallelStepper stepper(*run.model, run.store, *run.optimizer, schedule, sched,
                              {.control = &engine});
  std::vector<Batch> batches;
  for (std::int64_t i = 0; i < micro; ++i) {
    Batch mb = slice(mc, g, first + i * b, b, t);
    mb.nsp_labels = Tensor(g.labels.data() + first + i * b, DType::kI32, {b});
    batches.push_back(mb);
  }
  const StepResult r = stepper.step(0, batches);
  EXPECT_FALSE(r.skipped);
  out.loss = r.loss;
  for (std::size_t i = 0; i < run.initial.size(); ++i) {
    out.update.push_back(run.store.params()[i] - run.initial[i]);
  }
  return out;
}

// ||got - want|| / ||want|| and max |got - want| / max |want|.
std::pair<double, double> differences(const std::vector<float>& got,
                                      const std::vector<float>& want) {
  double d2 = 0, w2 = 0, dmax = 0, wmax = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    d2 += d * d, w2 += static_cast<double>(want[i]) * want[i];
    dmax = std::max(dmax, std::fabs(d)), wmax = std::max(wmax, std::fabs(double{want[i]}));
  }
  return {std::sqrt(d2 / w2), dmax / wmax};
}

TEST(DataParallel, BertMaskedLmWeighsMicroBatchesByTheirMaskedTokens) {
  auto comm = comm::make_mpi_communicator();
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  const int rank = (*comm)->rank(), size = (*comm)->size();
  auto self = comm::make_self_communicator();
  // fused_head=0: the materialized head, CrossEntropy, whose CUDA twin takes the same seed.
  for (const char* head : {"fused_head=1", "fused_head=0"}) {
    const std::string spec =
        std::string("bert-tiny n_ctx=16 vocab_size=256 dropout=0 attn_dropout=0 nsp=1 ") + head;
    auto mc = parse_model_spec(spec);
    ASSERT_TRUE(mc.is_ok()) << mc.status().message();
    constexpr std::int64_t b = 2, t = 16;
    GlobalBatch g = make_mlm_batch(*mc, size * b, t);
    const MlmStep want = mlm_step(*mc, *self, g, 0, size * b, 1, t);
    const std::pair<const char*, MlmStep> splits[] = {
        {"one rank, micro-batches of b", mlm_step(*mc, *self, g, 0, size * b, size, t)},
        {"P ranks, b rows each", mlm_step(*mc, **comm, g, rank * b, b, 1, t)},
        {"P ranks, micro-batches of one row", mlm_step(*mc, **comm, g, rank * b, b, b, t)},
    };
    for (const auto& [what, got] : splits) {
      const auto [grad_l2, grad_max] = differences(got.grad, want.grad);
      const auto [update_l2, update_max] = differences(got.update, want.update);
      const std::string where = fmt::format(
          "{}, {}, rank {}: relative difference of the gradient {:.3g} (max element {:.3g}), "
          "of the update {:.3g} (max element {:.3g})",
          spec, what, rank, grad_l2, grad_max, update_l2, update_max);
      EXPECT_LT(grad_l2, 1e-5) << where;
      EXPECT_LT(grad_max, 1e-5) << where;
      EXPECT_LT(update_l2, 1e-5) << where;
    }
  }
}

// The logged loss weighs this rank's micro-batches by their masked tokens too, so that on one
// rank it is the batch's masked-token mean however the batch is split; a micro-batch without
// a masked token entered the mean as 0, and a step without any logged 0 (review, 2026-12-07).
TEST(DataParallel, BertLoggedLossIsTheMaskedTokenMeanOfTheRanksMicroBatches) {
  auto self = comm::make_self_communicator();
  auto mc = parse_model_spec("bert-tiny n_ctx=16 vocab_size=256 dropout=0 attn_dropout=0 nsp=0");
  ASSERT_TRUE(mc.is_ok()) << mc.status().message();
  constexpr std::int64_t t = 16;
  GlobalBatch g = make_mlm_batch(*mc, 4, t);
  // Rows 2 and 3 without a masked token: half of the micro-batches count nothing.
  std::fill(g.targets.begin() + 2 * t, g.targets.begin() + 4 * t, kIgnoreIndex);
  const float whole = mlm_step(*mc, *self, g, 0, 4, 1, t).loss;
  ASSERT_TRUE(std::isfinite(whole));
  EXPECT_NEAR(mlm_step(*mc, *self, g, 0, 4, 4, t).loss, whole, 1e-5 * whole);
  EXPECT_NEAR(mlm_step(*mc, *self, g, 0, 4, 2, t).loss, whole, 1e-5 * whole);
  // Nothing counted in the whole step: no loss (null in the metrics), not 0.
  EXPECT_TRUE(std::isnan(mlm_step(*mc, *self, g, 2, 2, 2, t).loss));
}

}  // namespace
}  // namespace sparq::train
