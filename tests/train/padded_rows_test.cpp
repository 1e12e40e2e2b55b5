// Structurally-zero parameter rows never collect error-feedback residual: GPT-2's token
// table has padded_vocab() rows, and the rows past vocab_size get no gradient (no token
// looks them up and their logits are excluded from the softmax), so a = g + e stays exactly
// 0 there and every compressor must leave e = a - D(C(a)) exactly 0: a sparsifier never
// keeps a zero with a non-zero value, a block quantizer codes 0 as 0 with any scale.
// Trained for a few steps through the trainer's own pieces (store, bucket plan, exchange,
// WFBP scheduler, stepper) on one rank.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "comm/comm_engine.h"
#include "comm/wfbp_scheduler.h"
#include "compress/gradient_exchange.h"
#include "core/rng.h"
#include "models/model.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/data_parallel.h"

namespace sparq::train {
namespace {

constexpr std::int64_t kRows = 2, kSeq = 8, kVocab = 1000;  // padded to 1024

struct Residuals {
  double padded_max = 0;  // max |e| over the padded rows of wte
  double real_sq = 0;     // ||e||^2 over the real rows (must not be trivially zero)
};

Residuals train_and_inspect(const compress::CompressConfig& compressor) {
  auto mc = parse_model_spec("gpt2-tiny n_layer=1 n_head=2 n_embd=32 n_ctx=16 vocab_size=" +
                             std::to_string(kVocab));
  SPARQ_CHECK(mc.is_ok(), "{}", mc.status().message());
  EXPECT_GT(mc->padded_vocab(), mc->vocab_size);
  auto model = std::move(make_model(*mc, {kRows, kSeq})).value();
  ParamStore store;
  model->declare(store);
  store.allocate();
  store.initialize(3);
  model->bind(store);
  optim::OptimConfig oc;
  oc.name = "sgd";
  auto optimizer = std::move(optim::make_optimizer(oc, store)).value();
  optim::LrScheduleConfig lc;
  lc.lr = 0.1;
  optim::LrSchedule schedule(lc);
  comm::BucketPlanConfig pc;
  pc.first_bucket_mb = 0.05;
  pc.bucket_mb = 0.1;
  auto plan = comm::BucketPlan::build(store, model->layers(), pc).value();
  compress::GradientExchangeConfig xc;
  xc.compress = compressor;
  auto exchange = std::move(compress::GradientExchange::create(store, plan, xc)).value();
  auto self = comm::make_self_communicator();
  comm::CommEngine engine(*self, comm::CommEngine::Options{});
  comm::WfbpScheduler scheduler(plan, engine, *exchange);
  DataParallelStepper stepper(*model, store, *optimizer, schedule, scheduler, {});

  std::vector<std::int32_t> tokens(kRows * kSeq), targets(kRows * kSeq);
  for (int step = 0; step < 5; ++step) {
    const std::uint64_t stream =
        make_stream(RngPurpose::kData, 0, static_cast<std::uint32_t>(step));
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<std::int32_t>(random_u32_at(5, stream, 2 * i) % kVocab);
      targets[i] = static_cast<std::int32_t>(random_u32_at(5, stream, 2 * i + 1) % kVocab);
    }
    Batch b;
    b.tokens = Tensor(tokens.data(), DType::kI32, {kRows, kSeq});
    b.targets = Tensor(targets.data(), DType::kI32, {kRows, kSeq});
    const StepResult r = stepper.step(step, std::span<const Batch>(&b, 1));
    EXPECT_FALSE(r.skipped);
  }
  const ParamEntry& wte = store.entry("wte.weight");
  const std::int64_t dim = wte.spec.shape[1];
  const std::span<const float> e = exchange->residual();
  Residuals out;
  for (std::int64_t row = 0; row < mc->padded_vocab(); ++row) {
    for (std::int64_t j = 0; j < dim; ++j) {
      const double v = e[static_cast<std::size_t>(wte.offset + row * dim + j)];
      if (row >= kVocab) {
        out.padded_max = std::max(out.padded_max, std::fabs(v));
      } else {
        out.real_sq += v * v;
      }
    }
  }
  return out;
}

TEST(PaddedVocabRows, CollectNoResidualUnderErrorFeedback) {
  const compress::CompressConfig cases[] = {
      {"lbs", {{"density", "0.01"}, {"bits", "4"}}, "compress"},
      {"lbs", {{"density", "0.05"}, {"bits", "2"}, {"rounding", "stochastic"}}, "compress"},
      {"blockquant", {{"bits", "2"}}, "compress"},
      {"blockquant", {{"bits", "4"}, {"rounding", "stochastic"}}, "compress"},
      {"topk", {{"density", "0.01"}}, "compress"},
      {"topk", {{"density", "0.99"}}, "compress"},  // keeps zeros too: they must stay 0
  };
  for (const compress::CompressConfig& c : cases) {
    const Residuals r = train_and_inspect(c);
    EXPECT_EQ(r.padded_max, 0.0) << c.name;
    EXPECT_GT(r.real_sq, 0.0) << c.name << ": the real rows should carry a residual";
  }
}

}  // namespace
}  // namespace sparq::train
