// Helpers shared by the data-parallel tests (data_parallel_mpi_test.cpp and
// data_parallel_mlm_mpi_test.cpp): a dense averager, a global batch identical on every rank and
// its slices, and one training run (model, store, optimizer, bucket plan).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <vector>

#include "comm/bucket_plan.h"
#include "comm/comm_engine.h"
#include "comm/wfbp_scheduler.h"
#include "core/rng.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "train/data_parallel.h"

namespace sparq::train::testing_dp {

constexpr int kSteps = 5;

inline comm::FunctionAverager::Fn dense_average(const ParamStore& store) {
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

inline GlobalBatch make_global_batch(const ModelConfig& mc, std::int64_t rows, std::int64_t t,
                                     int step) {
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
inline Batch slice(const ModelConfig& mc, GlobalBatch& g, std::int64_t first, std::int64_t rows,
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

}  // namespace sparq::train::testing_dp
