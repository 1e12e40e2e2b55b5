// Data parallelism is exact without compression: P ranks with micro-batch b each reach the
// same parameters after several steps as one worker with batch P*b. Every rank runs both the
// distributed training (MPI communicator, WFBP scheduler with several buckets) and, locally,
// the single-worker reference (Self communicator), so nothing has to be compared across
// processes.
//
// VGG runs with BatchNorm in eval mode (running statistics): with batch statistics, P
// workers normalise over b images and one worker over P*b, so the two are different
// computations by definition (as in PyTorch DDP without SyncBatchNorm).
#include <gtest/gtest.h>

#include <cmath>

#include "comm/comm_engine.h"
#include "comm/mpi_communicator.h"
#include "comm/wfbp_scheduler.h"
#include "core/rng.h"
#include "models/model.h"
#include "train/data_parallel.h"

namespace sparq::train {
namespace {

constexpr int kSteps = 5;

comm::WfbpScheduler::BucketExchange dense_average(const ParamStore& store) {
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

  Run(const ModelConfig& mc, RunShape shape, const optim::OptimConfig& oc) {
    auto m = make_model(mc, shape);
    SPARQ_CHECK(m.is_ok(), "{}", m.status().message());
    model = std::move(m).value();
    model->declare(store);
    store.allocate();
    store.initialize(1234);
    model->bind(store);
    if (!mc.is_language_model()) model->set_training(false);
    optimizer = std::move(optim::make_optimizer(oc, store)).value();
    comm::BucketPlanConfig pc;
    pc.first_bucket_mb = 0.05;
    pc.bucket_mb = 0.25;
    std::vector<comm::LayerParams> layers;
    for (const auto& l : model->layers()) layers.push_back({l.name, l.tensors});
    plan = std::make_unique<comm::BucketPlan>(comm::BucketPlan::build(store, layers, pc).value());
  }

  void train(comm::Communicator& c, GlobalBatch (*batches)[kSteps], std::int64_t first,
             std::int64_t rows, std::int64_t t, double lr, bool eval_bn) {
    comm::CommEngine engine(c, comm::CommEngine::Options{});
    comm::WfbpScheduler sched(*plan, engine, dense_average(store));
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

void expect_same_training(const std::string& spec, const optim::OptimConfig& oc, double lr,
                          std::int64_t b, std::int64_t t) {
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
  Run single(*mc, {size * b, lm ? t : 0}, oc);
  auto self = comm::make_self_communicator();
  single.train(*self, &batches, 0, size * b, t, lr, !lm);

  double max_rel = 0;
  std::string worst;
  for (const auto& e : single.store.entries()) {
    const float* want = single.store.param(e.spec.name).data<float>();
    const float* got = distributed.store.param(e.spec.name).data<float>();
    for (std::int64_t i = 0; i < e.numel; ++i) {
      const double rel = std::fabs(got[i] - want[i]) / std::max(1e-2, std::fabs(double(want[i])));
      if (rel > max_rel) {
        max_rel = rel;
        worst = e.spec.name + "[" + std::to_string(i) + "]";
      }
    }
  }
  EXPECT_LT(max_rel, 1e-5) << spec << ": worst " << worst << " on rank " << rank;
}

// With AdamW the same comparison currently differs by up to ~8e-4 relative on a few
// elements (Adam normalises gradients that are sums of cancelling terms); that is tracked in
// the issue and not hidden by a looser bound here.
TEST(DataParallel, Gpt2TinySgdMatchesOneWorkerWithPTimesTheBatch) {
  optim::OptimConfig oc;
  oc.name = "sgd";
  oc.momentum = 0.9;
  oc.weight_decay = 0.1;
  expect_same_training("gpt2-tiny n_layer=2 vocab_size=256 n_ctx=32", oc, 0.05, 2, 16);
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
