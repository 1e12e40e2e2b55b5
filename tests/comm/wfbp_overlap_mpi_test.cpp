// WFBP under mpirun: buckets are averaged in place across ranks, and with overlap on the
// first bucket is submitted to the engine while backward is still running (the cause of
// any hidden communication), while with overlap off nothing is submitted before backward
// ends. How much communication was hidden depends on scheduling and is only printed. A
// readiness order that is not the plan's, with rank-dependent delays between reports, still
// gives every rank the same launch order (Note [Readiness launch order]).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "comm/comm_engine.h"
#include "comm/mpi_communicator.h"
#include "comm/stack_fixture.h"
#include "comm/wfbp_scheduler.h"
#include "core/check.h"

namespace sparq::comm {
namespace {

using testing::make_stack;

// Exchange = dense allreduce(avg) of the bucket's gradient range, in place.
FunctionAverager::Fn average_in_place(const ParamStore& store) {
  return [&store](Communicator& comm, const Bucket& b, std::int64_t) {
    float* g = store.grads() + b.range.offset;
    comm.allreduce(g, g, static_cast<std::size_t>(b.range.count), DType::kF32, ReduceOp::kAvg);
    return Status::ok();
  };
}

TEST(WfbpMpi, AveragesEveryBucketInPlace) {
  auto comm = make_mpi_communicator();
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  const int rank = (*comm)->rank(), size = (*comm)->size();
  BucketPlanConfig cfg;
  cfg.first_bucket_mb = 0.01;
  cfg.bucket_mb = 0.05;
  cfg.dense_patterns = {"*.bias"};
  auto s = make_stack(2, 32, cfg);
  auto plan = BucketPlan::build(s.store, s.layers, cfg);
  ASSERT_TRUE(plan.is_ok());
  CommEngine engine(**comm);
  FunctionAverager averager(average_in_place(s.store));
  WfbpScheduler sched(*plan, engine, averager);
  // Rank r holds (r + 1) * (i % 7): the average is exactly (size + 1) / 2 * (i % 7).
  for (std::int64_t i = 0; i < s.store.flat_numel(); ++i) {
    s.store.grads()[i] = static_cast<float>((rank + 1) * (i % 7));
  }
  sched.begin_step(0);
  for (auto it = s.store.entries().rbegin(); it != s.store.entries().rend(); ++it) {
    sched.on_grads_ready(it->range());
  }
  sched.on_backward_done();
  ASSERT_TRUE(sched.wait_all().is_ok());
  for (std::int64_t i = 0; i < s.store.flat_numel(); ++i) {
    ASSERT_EQ(s.store.grads()[i], static_cast<float>((size + 1) * (i % 7)) / 2.0f) << i;
  }
  EXPECT_GT(sched.step_stats().bytes_sent, 0u);
}

// One step of a backward with 10 ms of compute per layer (last layer first), one bucket per
// layer, each exchange a few milliseconds of "compression" then the real collective.
StepCommStats slow_backward_step(bool overlap) {
  auto comm = make_mpi_communicator();
  SPARQ_CHECK(comm.is_ok(), "{}", comm.status().message());
  BucketPlanConfig cfg;
  cfg.bucket_mb = 0;  // one bucket per layer
  auto s = make_stack(4, 32, cfg);
  auto plan = BucketPlan::build(s.store, s.layers, cfg);
  SPARQ_CHECK(plan.is_ok(), "{}", plan.status().message());
  CommEngine engine(**comm);
  FunctionAverager exchange([&](Communicator& c, const Bucket& b, std::int64_t step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return average_in_place(s.store)(c, b, step);
  });
  WfbpScheduler sched(*plan, engine, exchange, {.overlap = overlap});
  sched.begin_step(0);
  for (auto layer = s.layers.rbegin(); layer != s.layers.rend(); ++layer) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const auto& name : layer->tensors) sched.on_grads_ready(s.store.entry(name).range());
  }
  sched.on_backward_done();
  const Status done = sched.wait_all();
  SPARQ_CHECK(done.is_ok(), "{}", done.message());
  const StepCommStats st = sched.step_stats();
  // Information, not a verdict: the share hidden depends on how the threads were scheduled.
  std::printf("overlap %s: hidden %.1f of %.1f ms (%.0f%%), exposed %.1f ms\n",
              overlap ? "on" : "off", st.hidden_ms, st.comm_busy_ms, 100.0 * st.hidden_fraction(),
              st.exposed_ms);
  return st;
}

TEST(WfbpMpi, OverlapSubmitsTheFirstBucketDuringBackward) {
  const StepCommStats st = slow_backward_step(/*overlap=*/true);
  ASSERT_GT(st.buckets.size(), 1u);
  // Bucket 0 (the last layer) was complete after the first of many 10 ms layers.
  EXPECT_LT(st.buckets[0].enqueue_us, st.backward_end_us)
      << "with overlap on, the first bucket must be handed to the engine while backward is "
         "still running; it was enqueued "
      << st.buckets[0].enqueue_us - st.backward_end_us << " us after backward ended";
}

TEST(WfbpMpi, WithoutOverlapNothingIsSubmittedBeforeBackwardEnds) {
  const StepCommStats st = slow_backward_step(/*overlap=*/false);
  ASSERT_GT(st.buckets.size(), 1u);
  // The first bucket was ready during backward and held, not sent.
  EXPECT_LT(st.buckets[0].ready_us, st.backward_end_us);
  for (const BucketTiming& b : st.buckets) {
    EXPECT_GE(b.enqueue_us, st.backward_end_us) << "bucket " << b.index << " was submitted "
                                                << st.backward_end_us - b.enqueue_us
                                                << " us before backward ended";
  }
}

TEST(WfbpMpi, ReorderedReadinessGivesEveryRankTheSameLaunchOrder) {
  auto comm = make_mpi_communicator();
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  const int rank = (*comm)->rank(), size = (*comm)->size();
  BucketPlanConfig cfg;
  cfg.first_bucket_mb = 0.01;
  cfg.bucket_mb = 0.03;
  cfg.dense_patterns = {"*.bias"};
  auto s = make_stack(3, 32, cfg);
  auto plan = BucketPlan::build(s.store, s.layers, cfg);
  ASSERT_TRUE(plan.is_ok());
  ASSERT_GT(plan->size(), 4u);
  CommEngine engine(**comm);
  std::mutex mutex;
  std::vector<int> ran;  // what the engine thread executed, in order
  FunctionAverager recording([&](Communicator& c, const Bucket& b, std::int64_t) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ran.push_back(b.index);
    }
    float* g = s.store.grads() + b.range.offset;
    c.allreduce(g, g, static_cast<std::size_t>(b.range.count), DType::kF32, ReduceOp::kAvg);
    return Status::ok();
  });
  WfbpScheduler sched(*plan, engine, recording);
  // The same report sequence on every rank (a shuffle with a shared seed, dense tensors
  // early and late), but each rank sleeps differently between reports.
  std::vector<ParamRange> ranges;
  for (const auto& e : s.store.entries()) ranges.push_back(e.range());
  std::mt19937 shared(11);
  std::shuffle(ranges.begin(), ranges.end(), shared);
  std::mt19937 own(100 + rank);
  sched.begin_step(0);
  for (const ParamRange& r : ranges) {
    std::this_thread::sleep_for(std::chrono::microseconds(own() % 3000));
    sched.on_grads_ready(r);
  }
  sched.on_backward_done();
  ASSERT_TRUE(sched.wait_all().is_ok());
  const std::vector<int>& order = sched.step_stats().launch_order;
  ASSERT_EQ(order.size(), plan->size());
  EXPECT_EQ(ran, order);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(order, sorted) << "the shuffle kept the plan order: the test proves nothing";
  std::vector<int> all(order.size() * static_cast<std::size_t>(size));
  (*comm)->allgather(order.data(), all.data(), order.size(), DType::kI32);
  for (int r = 0; r < size; ++r) {
    const std::vector<int> theirs(all.begin() + r * order.size(),
                                  all.begin() + (r + 1) * order.size());
    EXPECT_EQ(theirs, order) << "rank " << r << " launched in another order than rank " << rank;
  }
}

}  // namespace
}  // namespace sparq::comm
