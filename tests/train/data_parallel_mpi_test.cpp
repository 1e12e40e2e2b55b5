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
#include "models/model.h"
#include "train/data_parallel.h"

namespace sparq::train {
namespace {

constexpr int kSteps = 5;

comm::FunctionAverager::Fn dense_average(const ParamStore& store) {
  return [&store](comm::Communicator& c, const comm::Bucket& b, std::int64_t) {
    float* g = store.grads() + b.range.offset;
    c.allreduce(g, g, static_cast<std::size_t>(b.range.count), DType::kF32, comm::ReduceOp::kAvg);
    return Status::ok();
  };
}

// The whole global batch of one step, identical on every rank.
struct GlobalBatch {
  std::vector<std::int32_t> tokens, targets, labels;
  std::vector<float> images;
};

GlobalBatch make_global_batch(const ModelConfig& mc, std::int64_t rows, std::int64_t t, int step) {
  GlobalBatch g;
  const std::uint64_t stream = make_stream(RngPurpose::kData, 0, static_cast<std::uint32_t>(step));
  if (mc.is_language_model()) {
    g.tokens.resize(rows * t);
    g.targets.resize(rows * t);
    for (std::int64_t i = 0; i < rows * (t + 1); ++i) {
      const auto tok = static_cast<std::int32_t>(random_u32_at(99, stream, i) % mc.vocab_size);
      const std::int64_t row = i / (t + 1), col = i % (t + 1);
      if (col < t) g.tokens[row * t + col] = tok;
      if (col > 0) g.targets[row * t + col - 1] = tok;
    }
  } else {
    const std::int64_t pixels = mc.in_channels * mc.image_size * mc.image_size;
    g.images.resize(rows * pixels);
    fill_normal(g.images.data(), g.images.size(), 0.0f, 1.0f, 99, stream);
    g.labels.resize(rows);
    for (std::int64_t i = 0; i < rows; ++i) {
      g.labels[i] = static_cast<std::int32_t>(random_u32_at(98, stream, i) % mc.num_classes);
    }
  }
  return g;
}

// Rows [first, first + rows) of the global batch as a Batch of views.
Batch slice(const ModelConfig& mc, GlobalBatch& g, std::int64_t first, std::int64_t rows,
            std::int64_t t) {
  Batch b;
  if (mc.is_language_model()) {
    b.tokens = Tensor(g.tokens.data() + first * t, DType::kI32, {rows, t});
    b.targets = Tensor(g.targets.data() + first * t, DType::kI32, {rows, t});
  } else {
    const std::int64_t s = mc.image_size, c = mc.in_channels;
    b.images = Tensor(g.images.data() + first * c * s * s, DType::kF32, {rows, c, s, s});
    b.labels = Tensor(g.labels.data() + first, DType::kI32, {rows});
  }
  return b;
}

// One training run: a model, its store, optimizer and scheduler on `comm`.
struct Run {
  std::unique_ptr<Model> model;
  ParamStore store;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<comm::BucketPlan> plan;
  std::vector<float> initial;  // the parameters before step 0

  Run(const ModelConfig& mc, RunShape shape, const optim::OptimConfig& oc) {
    auto m = make_model(mc, shape);
    SPARQ_CHECK(m.is_ok(), "{}", m.status().message());
    model = std::move(m).value();
    model->declare(store);
    store.allocate();
    store.initialize(1234);
    model->bind(store);
    initial.assign(store.params(), store.params() + store.flat_numel());
    if (!mc.is_language_model()) model->set_training(false);
    optimizer = std::move(optim::make_optimizer(oc, store)).value();
    comm::BucketPlanConfig pc;
    pc.first_bucket_mb = 0.05;
    pc.bucket_mb = 0.25;
    plan = std::make_unique<comm::BucketPlan>(
        comm::BucketPlan::build(store, model->layers(), pc).value());
  }

  void train(comm::Communicator& c, GlobalBatch (*batches)[kSteps], std::int64_t first,
             std::int64_t rows, std::int64_t t, double lr, bool eval_bn) {
    comm::CommEngine engine(c, comm::CommEngine::Options{});
    comm::FunctionAverager averager(dense_average(store));
    comm::WfbpScheduler sched(*plan, engine, averager);
    optim::LrScheduleConfig lc;
    lc.lr = lr;
    optim::LrSchedule schedule(lc);
    DataParallelStepper stepper(*model, store, *optimizer, schedule, sched, {});
    for (int step = 0; step < kSteps; ++step) {
      Batch b = slice(model->config(), (*batches)[step], first, rows, t);
      if (eval_bn) model->set_training(false);
      const StepResult r = stepper.step(step, std::span<const Batch>(&b, 1));
      ASSERT_FALSE(r.skipped);
      ASSERT_TRUE(std::isfinite(r.loss));
    }
  }
};

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
  EXPECT_FALSE(stepper.step(0, batches).skipped);
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

TEST(DataParallel, VggTinySgdMomentumMatchesOneWorkerWithPTimesTheBatch) {
  optim::OptimConfig oc;
  oc.name = "sgd";
  oc.momentum = 0.9;
  oc.weight_decay = 5e-4;
  expect_same_training("vgg-tiny", oc, 0.05, 2, 0);
}

}  // namespace
}  // namespace sparq::train
