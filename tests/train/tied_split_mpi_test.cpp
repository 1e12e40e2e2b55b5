// The split tied embedding (Note [Tied embedding split], models/model.h) under mpirun:
// GPT-2's wte is reported ready right after the LM head's backward, so its buckets launch
// first, and the lookup's share travels at the end as exact rows (the scheduler's tail task).
// The gradient it leaves is the unsplit one: bit for bit at one rank, to float rounding at
// several. Every rank runs one SGD step (lr 1, so p0 - p1 is the averaged gradient) both ways
// from the same parameters and its own slice of one global batch, dense averaging in place.
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

constexpr std::int64_t kRows = 2, kSeq = 16;

struct Outcome {
  std::vector<float> params;  // after the step
  comm::StepCommStats comm;
  std::vector<comm::Bucket> buckets;
};

Outcome one_step(comm::Communicator& c, bool split) {
  auto mc = parse_model_spec("gpt2-tiny n_layer=2 n_head=2 n_embd=32 n_ctx=16 vocab_size=1000");
  SPARQ_CHECK(mc.is_ok(), "{}", mc.status().message());
  auto model = std::move(make_model(*mc, {kRows, kSeq})).value();
  ParamStore store;
  comm::BucketPlanConfig pc;
  pc.first_bucket_mb = 0.02;
  pc.bucket_mb = 0.05;
  pc.dense_patterns = {"*.bias", "*ln_*"};
  if (split) pc.isolated = {model->tied_embedding()};
  model->declare(store);
  store.allocate(ExecContext::cpu(), [&](const ParamSpec& s) { return pc.is_dense(s); });
  store.initialize(77);
  model->bind(store);
  optim::OptimConfig oc;
  oc.name = "sgd";
  auto optimizer = std::move(optim::make_optimizer(oc, store)).value();
  const comm::BucketPlan plan = comm::BucketPlan::build(store, model->layers(), pc).value();
  comm::CommEngine engine(c, comm::CommEngine::Options{});
  comm::FunctionAverager averager([&](comm::Communicator& cm, const comm::Bucket& b,
                                      std::int64_t) {
    float* g = store.grads() + b.range.offset;
    cm.allreduce(g, g, static_cast<std::size_t>(b.range.count), DType::kF32, comm::ReduceOp::kAvg);
    return Status::ok();
  });
  comm::WfbpScheduler sched(plan, engine, averager);
  optim::LrScheduleConfig lc;
  lc.lr = 1.0;
  optim::LrSchedule schedule(lc);
  DataParallelStepper stepper(*model, store, *optimizer, schedule, sched,
                              {.split_tied_embedding = split});
  // This rank's rows of a global batch; ids from a quarter of the vocabulary, so the rows
  // repeat within and across ranks.
  std::vector<std::int32_t> tokens(kRows * kSeq), targets(kRows * kSeq);
  const std::uint64_t stream = make_stream(RngPurpose::kData, 0, 0);
  for (std::int64_t i = 0; i < kRows * kSeq; ++i) {
    const std::int64_t global = c.rank() * kRows * kSeq + i;
    tokens[i] = static_cast<std::int32_t>(random_u32_at(5, stream, global) % 250);
    targets[i] = static_cast<std::int32_t>(random_u32_at(6, stream, global) % 1000);
  }
  Batch b;
  b.tokens = Tensor(tokens.data(), DType::kI32, {kRows, kSeq});
  b.targets = Tensor(targets.data(), DType::kI32, {kRows, kSeq});
  const StepResult r = stepper.step(0, std::span<const Batch>(&b, 1));
  SPARQ_CHECK(!r.skipped, "the step was skipped");
  Outcome out;
  out.params.assign(store.params(), store.params() + store.flat_numel());
  out.comm = r.comm;
  out.buckets = plan.buckets();
  return out;
}

bool is_wte_bucket(const comm::Bucket& b) {
  return std::all_of(b.tensors.begin(), b.tensors.end(),
                     [](const std::string& t) { return t == "wte.weight"; });
}

TEST(TiedSplitMpi, EqualsTheUnsplitGradientAndLaunchesTheTableFirst) {
  auto comm = comm::make_mpi_communicator();
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  const Outcome whole = one_step(**comm, false);
  const Outcome split = one_step(**comm, true);

  // The table's buckets go first when split, last when whole (the readiness order).
  const std::vector<int>& order = split.comm.launch_order;
  ASSERT_EQ(order.size(), split.buckets.size());
  std::size_t wte_buckets = 0;
  for (const comm::Bucket& b : split.buckets) wte_buckets += is_wte_bucket(b);
  ASSERT_GE(wte_buckets, 2u) << "the table should span several buckets";
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(is_wte_bucket(split.buckets[order[i]]), i < wte_buckets) << "launch " << i;
  }
  const comm::BucketTiming& first = split.comm.buckets[order.front()];
  for (std::size_t i = wte_buckets; i < order.size(); ++i) {
    EXPECT_LE(first.enqueue_us, split.comm.buckets[order[i]].ready_us)
        << "the table was submitted after bucket " << order[i] << " was ready";
  }
  ASSERT_TRUE(split.comm.tail.has_value());
  EXPECT_FALSE(whole.comm.tail.has_value());
  EXPECT_TRUE(is_wte_bucket(whole.buckets[whole.comm.launch_order.back()]));
  if ((*comm)->size() > 1) { EXPECT_GT(split.comm.tail->bytes.sent, 0u); }

  // p0 - p1 is the averaged gradient; both runs started from the same p0.
  ASSERT_EQ(whole.params.size(), split.params.size());
  if ((*comm)->size() == 1) {
    for (std::size_t i = 0; i < whole.params.size(); ++i) {
      ASSERT_EQ(whole.params[i], split.params[i]) << "element " << i << " differs at one rank";
    }
    return;
  }
  auto fresh = std::move(make_model(
      parse_model_spec("gpt2-tiny n_layer=2 n_head=2 n_embd=32 n_ctx=16 vocab_size=1000").value(),
      {kRows, kSeq})).value();
  ParamStore p0;
  fresh->declare(p0);
  comm::BucketPlanConfig pc;
  pc.dense_patterns = {"*.bias", "*ln_*"};
  p0.allocate(ExecContext::cpu(), [&](const ParamSpec& s) { return pc.is_dense(s); });
  p0.initialize(77);
  double max_diff = 0, max_grad = 0;
  std::size_t differing = 0;
  const ParamRange wte = p0.entry("wte.weight").range();
  for (std::int64_t i = 0; i < p0.flat_numel(); ++i) {
    const double gw = p0.params()[i] - static_cast<double>(whole.params[i]);
    const double gs = p0.params()[i] - static_cast<double>(split.params[i]);
    if (i < wte.offset || i >= wte.end()) {
      ASSERT_EQ(whole.params[i], split.params[i]) << "element " << i << " is not in the table";
      continue;
    }
    max_diff = std::max(max_diff, std::abs(gw - gs));
    max_grad = std::max(max_grad, std::abs(gw));
    differing += whole.params[i] != split.params[i];
  }
  EXPECT_GT(max_grad, 0.0);
  EXPECT_LE(max_diff, 1e-5 * max_grad) << differing << " table elements differ";
}

}  // namespace
}  // namespace sparq::train
