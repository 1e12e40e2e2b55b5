// Data parallelism is exact without compression: P ranks with micro-batch b each reach the
// same parameters after several steps as one worker with batch P*b. Every rank runs both the
// distributed training (MPI communicator, WFBP scheduler with several buckets) and, locally,
// the single-worker reference (Self communicator), so nothing has to be compared across
// processes.
//
// SGD must agree to 1e-5 relative on every element. Adam(W) gets a tolerance of its own,
// explained at Agreement below.
//
// The optimizer modes that send something other than the gradient (optimizer.h) are exact in
// the same sense where what they send is linear in the gradient: SGD's local direction
// mu buf + g + wd p (communicate: update; the mean of the ranks' buffers is the one worker's
// buffer), and Adam's local momentum once the variance is frozen (communicate: momentum, after
// dense Adam steps). P ranks in those modes are checked against one worker with P*b in plain
// SGD, and in the same momentum mode.
//
// VGG runs with BatchNorm in eval mode (running statistics): with batch statistics, P
// workers normalise over b images and one worker over P*b, so the two are different
// computations by definition (as in PyTorch DDP without SyncBatchNorm).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
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
using testing_dp::kSteps;
using testing_dp::make_global_batch;
using testing_dp::Run;
using testing_dp::slice;

// How far the P-worker parameters `got` are from the one-worker parameters `want`.
//
// SGD moves an element by lr * g, so gradients that differ by float rounding (P means of b
// rows against one mean of P*b rows: ||g_P - g_1|| / ||g_1|| is 1.3e-7 at step 0) give
// parameters that agree to ~1e-6 relative; every element must be within 1e-5.
//
// Adam moves an element by lr * m / (sqrt(v) + eps): about lr whatever the gradient's size,
// which amplifies rounding wherever the gradient is itself rounding noise. GPT-2's key bias
// has a gradient of exactly zero in exact arithmetic (softmax ignores a shift shared by every
// key), so in float it is noise of ~1e-11; with eps = 1e-8 Adam turns that into steps of
// lr * g / eps ~ 1e-3 lr, and the two runs' noise differs in sign and size. Measured with
// AdamW (lr 1e-3, 5 steps, 2 ranks): 269 elements, almost all of them key biases (the rest
// have gradients that are sums of cancelling terms), differ by more than 1e-5, at most by
// 1.2e-3 relative or 2.5e-3 lr * steps; the median element differs by 5e-8. ONE worker
// whose gradients are perturbed by +-2^-24 relative (half an ulp) differs from itself as much:
// 248 elements, 8.4e-4, 1.7e-3 lr * steps. So for Adam three things are checked: almost
// every element still agrees to 1e-5 (a wrong gradient anywhere reaches nearly all of them
// within a few steps), no element moved differently by more than 1% of Adam's largest
// movement lr * steps, and the whole difference vector is below 1e-4 of the update p_1 - p_0.
// Averaging by P - 1 instead of P, which Adam is nearly blind to, fails all three (7.8% of
// the elements, 1.4e-2 lr * steps, 2.2e-4 with 4 ranks; noise: 0.06%, 1.2e-3, 1.8e-5).
struct Agreement {
  double max_rel = 0;          // max over elements of |got - want| / max(|want|, 1e-2)
  double share_above = 0;      // share of the elements where that exceeds kElementTolerance
  double max_in_lr_steps = 0;  // max |got - want| / (lr * kSteps)
  double rel_l2 = 0;           // ||got - want|| / ||want - initial||
  std::string worst;
};

constexpr double kElementTolerance = 1e-5;

Agreement compare(const Run& want, const Run& got, double lr) {
  Agreement a;
  double diff2 = 0, update2 = 0;
  std::int64_t above = 0, count = 0;
  for (const auto& e : want.store.entries()) {
    for (std::int64_t i = e.offset; i < e.offset + e.numel; ++i) {
      const double w = want.store.params()[i], g = got.store.params()[i];
      const double rel = std::fabs(g - w) / std::max(1e-2, std::fabs(w));
      // Written as !(x <= y) so that a NaN counts as a failure.
      if (!(rel <= a.max_rel)) {
        a.max_rel = rel;
        a.worst = e.spec.name + "[" + std::to_string(i - e.offset) + "]";
      }
      if (!(rel <= kElementTolerance)) ++above;
      a.max_in_lr_steps = std::max(a.max_in_lr_steps, std::fabs(g - w) / (lr * kSteps));
      diff2 += (g - w) * (g - w);
      update2 += (w - want.initial[i]) * (w - want.initial[i]);
      ++count;
    }
  }
  a.share_above = static_cast<double>(above) / static_cast<double>(count);
  a.rel_l2 = std::sqrt(diff2 / update2);
  return a;
}

// `oc` for the P ranks, `single_oc` for the one worker.
void expect_same_training(const std::string& spec, const optim::OptimConfig& oc,
                          const optim::OptimConfig& single_oc, double lr, std::int64_t b,
                          std::int64_t t) {
  auto comm = comm::make_mpi_communicator();
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  const int rank = (*comm)->rank(), size = (*comm)->size();
  auto mc = parse_model_spec(spec);
  ASSERT_TRUE(mc.is_ok()) << mc.status().message();
  const bool lm = mc->is_language_model();
  GlobalBatch batches[kSteps];
  for (int s = 0; s < kSteps; ++s) batches[s] = make_global_batch(*mc, size * b, t, s);

  Run distributed(*mc, {b, lm ? t : 0}, oc);
  distributed.train(**comm, &batches, rank * b, b, t, lr, !lm);
  Run single(*mc, {size * b, lm ? t : 0}, single_oc);
  auto self = comm::make_self_communicator();
  single.train(*self, &batches, 0, size * b, t, lr, !lm);

  const Agreement a = compare(single, distributed, lr);
  const std::string where = fmt::format(
      "{} ({} communicating the {}, {} ranks, rank {}): max relative difference {:.3g} at {}, {:.3g}% of the "
      "elements above {}, max difference {:.3g} lr * steps, ||dp|| / ||update|| {:.3g}",
      spec, oc.name, oc.communicate, size, rank, a.max_rel, a.worst, 100 * a.share_above, kElementTolerance,
      a.max_in_lr_steps, a.rel_l2);
  if (oc.name == "sgd") {
    EXPECT_LT(a.max_rel, kElementTolerance) << where;
  } else {
    EXPECT_LT(a.share_above, 1e-2) << where;
    EXPECT_LT(a.max_in_lr_steps, 1e-2) << where;
    EXPECT_LT(a.rel_l2, 1e-4) << where;
  }
}

void expect_same_training(const std::string& spec, const optim::OptimConfig& oc, double lr,
                          std::int64_t b, std::int64_t t) {
  expect_same_training(spec, oc, oc, lr, b, t);
}

TEST(DataParallel, Gpt2TinySgdMatchesOneWorkerWithPTimesTheBatch) {
  optim::OptimConfig oc;
  oc.name = "sgd";
  oc.momentum = 0.9;
  oc.weight_decay = 0.1;
  expect_same_training("gpt2-tiny n_layer=2 vocab_size=256 n_ctx=32", oc, 0.05, 2, 16);
}

TEST(DataParallel, Gpt2TinyAdamWMatchesOneWorkerWithPTimesTheBatch) {
  optim::OptimConfig oc;
  oc.name = "adamw";
  oc.weight_decay = 0.1;
  expect_same_training("gpt2-tiny n_layer=2 vocab_size=256 n_ctx=32", oc, 1e-3, 2, 16);
}

TEST(DataParallel, Gpt2TinySgdSendingItsUpdateMatchesOneWorkerWithPTimesTheBatch) {
  optim::OptimConfig plain;
  plain.name = "sgd";
  plain.momentum = 0.9;
  plain.nesterov = true;
  plain.weight_decay = 0.1;
  optim::OptimConfig update = plain;
  update.communicate = "update";
  expect_same_training("gpt2-tiny n_layer=2 vocab_size=256 n_ctx=32", update, plain, 0.05, 2, 16);
}

TEST(DataParallel, Gpt2TinyAdamWSendingItsMomentumMatchesOneWorkerWithPTimesTheBatch) {
  optim::OptimConfig oc;
  oc.name = "adamw";
  oc.weight_decay = 0.1;
  oc.communicate = "momentum";
  oc.freeze_steps = 2;  // steps 0 and 1 dense Adam, 2..4 with the local momentum sent
  expect_same_training("gpt2-tiny n_layer=2 vocab_size=256 n_ctx=32", oc, 1e-3, 2, 16);
}

// With gradient accumulation each micro-batch draws its own dropout masks: the same rows
// twice in one step give two different losses, so the step's loss (their mean) differs from
// the loss of those rows alone. When every micro-batch reused the step's masks, it was equal.
TEST(DataParallel, AccumulatedMicroBatchesDrawTheirOwnDropoutMasks) {
  auto mc = parse_model_spec("gpt2-tiny n_layer=2 vocab_size=256 n_ctx=32 dropout=0.5");
  ASSERT_TRUE(mc.is_ok()) << mc.status().message();
  GlobalBatch g = make_global_batch(*mc, 2, 16, 0);
  optim::OptimConfig oc;
  oc.name = "sgd";
  auto self = comm::make_self_communicator();
  const auto step0_loss = [&](int micro_batches) {
    struct Run run(*mc, {2, 16}, oc);  // "struct": Run alone is gtest's Test::Run here
    comm::CommEngine engine(*self, comm::CommEngine::Options{});
    comm::FunctionAverager averager(dense_average(run.store));
    comm::WfbpScheduler sched(*run.plan, engine, averager);
    optim::LrSchedule schedule(optim::LrScheduleConfig{});
    DataParallelStepper stepper(*run.model, run.store, *run.optimizer, schedule, sched, {});
    const Batch b = slice(*mc, g, 0, 2, 16);
    const std::vector<Batch> batches(static_cast<std::size_t>(micro_batches), b);
    return stepper.step(0, batches).loss;
  };
  const float alone = step0_loss(1), twice = step0_loss(2);
  ASSERT_TRUE(std::isfinite(alone) && std::isfinite(twice));
  EXPECT_NE(twice, alone) << "both micro-batches drew the same dropout masks";
}

TEST(DataParallel, VggTinySgdMomentumMatchesOneWorkerWithPTimesTheBatch) {
  optim::OptimConfig oc;
  oc.name = "sgd";
  oc.momentum = 0.9;
  oc.weight_decay = 5e-4;
  expect_same_training("vgg-tiny", oc, 0.05, 2, 0);
}

}  // namespace
}  // namespace sparq::train
