// WFBP under mpirun: buckets are averaged in place across ranks, and with a backward slow
// enough per layer, communication starts before backward ends and most of it is hidden.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/comm_engine.h"
#include "comm/mpi_communicator.h"
#include "comm/stack_fixture.h"
#include "comm/wfbp_scheduler.h"

namespace sparq::comm {
namespace {

using testing::make_stack;

// Exchange = dense allreduce(avg) of the bucket's gradient range, in place.
WfbpScheduler::AverageBucketFn average_in_place(const ParamStore& store) {
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
  WfbpScheduler sched(*plan, engine, average_in_place(s.store));
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

TEST(WfbpMpi, CommunicationOverlapsASlowBackward) {
  auto comm = make_mpi_communicator();
  ASSERT_TRUE(comm.is_ok());
  BucketPlanConfig cfg;
  cfg.bucket_mb = 0;  // one bucket per layer
  auto s = make_stack(4, 32, cfg);
  auto plan = BucketPlan::build(s.store, s.layers, cfg);
  ASSERT_TRUE(plan.is_ok());
  CommEngine engine(**comm);
  auto exchange = [&](Communicator& c, const Bucket& b, std::int64_t step) {
    // A few milliseconds of "compression" per bucket, then the real collective.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return average_in_place(s.store)(c, b, step);
  };
  WfbpScheduler sched(*plan, engine, exchange);
  sched.begin_step(0);
  // Backward: 10 ms of compute per layer, last layer first, then report its tensors.
  for (auto layer = s.layers.rbegin(); layer != s.layers.rend(); ++layer) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const auto& name : layer->tensors) sched.on_grads_ready(s.store.entry(name).range());
  }
  sched.on_backward_done();
  ASSERT_TRUE(sched.wait_all().is_ok());
  const StepCommStats& st = sched.step_stats();
  EXPECT_LT(st.buckets[0].start_us, st.backward_end_us)
      << "the first bucket must start communicating while backward is still running";
  EXPECT_GT(st.hidden_fraction(), 0.5) << "hidden " << st.hidden_ms << " of " << st.comm_busy_ms
                                       << " ms; exposed " << st.exposed_ms << " ms";
}

}  // namespace
}  // namespace sparq::comm
