// WFBP scheduler in one process (Self communicator): launch order, readiness order,
// the non-overlapping baseline, gradient accumulation, and misuse.
#include "comm/wfbp_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>

#include "comm/comm_engine.h"
#include "comm/stack_fixture.h"
#include "common/log_capture.h"

namespace sparq::comm {
namespace {

using testing::make_stack;
using testing::Stack;

struct Recorder final : BucketAverager {
  std::mutex mutex;
  std::vector<int> order;
  Status average_bucket(Communicator&, const Bucket& b, std::int64_t) override {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back(b.index);
    return Status::ok();
  }
};

BucketPlanConfig small_buckets() {
  BucketPlanConfig cfg;
  cfg.first_bucket_mb = 0.02;
  cfg.bucket_mb = 0.05;
  return cfg;
}

// A stack, its plan with small buckets, and an engine over a world of one.
struct SchedulerEnv {
  explicit SchedulerEnv(int blocks)
      : stack(make_stack(blocks, 32, small_buckets())),
        plan(BucketPlan::build(stack.store, stack.layers, small_buckets()).value()),
        self(make_self_communicator()),
        engine(*self, CommEngine::Options{}) {}
  Stack stack;
  BucketPlan plan;
  std::unique_ptr<Communicator> self;
  CommEngine engine;
};

// Reports every tensor in reverse layout order, as backward would.
void report_backward(const Stack& s, WfbpScheduler& sched) {
  std::vector<const ParamEntry*> entries;
  for (const auto& e : s.store.entries()) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->offset > b->offset; });
  for (const ParamEntry* e : entries) sched.on_grads_ready(e->range());
}

TEST(WfbpScheduler, LaunchesEveryBucketOnceInPlanOrder) {
  SchedulerEnv env(3);
  Stack& s = env.stack;
  const BucketPlan& plan = env.plan;
  CommEngine& engine = env.engine;
  ASSERT_GT(plan.size(), 3u);
  Recorder rec;
  WfbpScheduler sched(plan, engine, rec);
  for (int step = 0; step < 3; ++step) {
    sched.begin_step(step);
    report_backward(s, sched);
    sched.on_backward_done();
    ASSERT_TRUE(sched.wait_all().is_ok());
    const auto& stats = sched.step_stats();
    for (const auto& t : stats.buckets) {
      EXPECT_GT(t.ready_us, 0);
      EXPECT_GE(t.enqueue_us, t.ready_us);
      EXPECT_GE(t.start_us, t.enqueue_us);
      EXPECT_GE(t.end_us, t.start_us);
    }
  }
  ASSERT_EQ(rec.order.size(), 3 * plan.size());
  for (std::size_t i = 0; i < rec.order.size(); ++i) {
    EXPECT_EQ(rec.order[i], static_cast<int>(i % plan.size()));
  }
}

// The launch order a report sequence must give (Note [Readiness launch order]), worked out
// independently of the scheduler: a bucket completes at the report of the last tensor piece
// inside it; buckets completed by the same report go in index order.
std::vector<int> expected_readiness_order(const BucketPlan& plan,
                                          const std::vector<ParamRange>& reports) {
  std::vector<std::pair<std::size_t, int>> done;  // (report position, bucket)
  for (const Bucket& b : plan.buckets()) {
    std::size_t last = 0;
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const ParamRange& r = reports[i];
      if (std::max(r.offset, b.range.offset) < std::min(r.end(), b.range.end())) last = i;
    }
    done.emplace_back(last, b.index);
  }
  std::sort(done.begin(), done.end());
  std::vector<int> order;
  for (auto [pos, b] : done) order.push_back(b);
  return order;
}

TEST(WfbpScheduler, LaunchesInReadinessOrderNotPlanOrder) {
  SchedulerEnv env(3);
  Stack& s = env.stack;
  const BucketPlan& plan = env.plan;
  std::vector<ParamRange> ranges;
  for (const auto& e : s.store.entries()) ranges.push_back(e.range());
  for (std::uint32_t seed : {7u, 8u, 9u}) {
    for (bool overlap : {true, false}) {
      Recorder rec;
      WfbpScheduler sched(plan, env.engine, rec, {.overlap = overlap});
      std::mt19937 rng(seed);
      std::shuffle(ranges.begin(), ranges.end(), rng);
      const std::vector<int> expected = expected_readiness_order(plan, ranges);
      std::vector<int> plan_order(plan.size());
      std::iota(plan_order.begin(), plan_order.end(), 0);
      EXPECT_NE(expected, plan_order) << "seed " << seed << " happens to keep the plan order";
      sched.begin_step(0);
      // Each complete bucket is on the engine at once (overlap) or none before backward ends.
      std::size_t complete = 0;
      for (const ParamRange& r : ranges) {
        sched.on_grads_ready(r);
        complete = 0;
        for (const BucketTiming& t : sched.step_stats().buckets) complete += t.ready_us > 0;
        EXPECT_EQ(sched.step_stats().launch_order.size(), overlap ? complete : 0u);
      }
      sched.on_backward_done();
      ASSERT_TRUE(sched.wait_all().is_ok());
      EXPECT_EQ(sched.step_stats().launch_order, expected) << "seed " << seed;
      EXPECT_EQ(rec.order, expected) << "seed " << seed << ": the engine ran another order";
    }
  }
}

TEST(WfbpScheduler, BaselineModeWaitsForBackwardAndAccumulationSendsNothing) {
  SchedulerEnv env(2);
  Stack& s = env.stack;
  const BucketPlan& plan = env.plan;
  CommEngine& engine = env.engine;
  Recorder rec;
  WfbpScheduler sched(plan, engine, rec, {.overlap = false});
  sched.begin_step(0, /*communicate=*/false);  // a non-final micro-batch
  report_backward(s, sched);
  sched.on_backward_done();
  ASSERT_TRUE(sched.wait_all().is_ok());
  EXPECT_TRUE(rec.order.empty());
  sched.begin_step(0, /*communicate=*/true);
  report_backward(s, sched);
  EXPECT_EQ(engine.in_flight(), 0u);  // held back until backward ends
  EXPECT_TRUE(rec.order.empty());
  sched.on_backward_done();
  ASSERT_TRUE(sched.wait_all().is_ok());
  EXPECT_EQ(rec.order.size(), plan.size());
  for (const auto& t : sched.step_stats().buckets) {
    EXPECT_GE(t.start_us, sched.step_stats().backward_end_us);
  }
  EXPECT_EQ(sched.step_stats().hidden_ms, 0.0);
}

TEST(WfbpScheduler, ExchangeErrorsSurfaceWithTheBucket) {
  SchedulerEnv env(1);
  Stack& s = env.stack;
  const BucketPlan& plan = env.plan;
  CommEngine& engine = env.engine;
  FunctionAverager failing([](Communicator&, const Bucket& b, std::int64_t) {
    return b.index == 1 ? Status::error("decode failed") : Status::ok();
  });
  WfbpScheduler sched(plan, engine, failing);
  sched.begin_step(4);
  report_backward(s, sched);
  sched.on_backward_done();
  const Status st = sched.wait_all();
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.message(), "bucket 1 of step 4: decode failed");
}

// Note [What wait_all reports] (comm_queue.h), through the scheduler: each bucket's wait()
// marks its task reported, so a failure the scheduler kept only as "the first" was lost for
// good (review, 2026-12-06: bucket 0's error vanished behind bucket 1's exception).
TEST(WfbpScheduler, WaitAllReportsEveryFailedBucket) {
  SchedulerEnv env(3);
  ASSERT_GT(env.plan.size(), 3u);
  FunctionAverager failing([](Communicator&, const Bucket& b, std::int64_t) -> Status {
    if (b.index == 0) return Status::error("corrupt message");
    if (b.index == 1) throw std::runtime_error("decoder threw");
    if (b.index == 2) return Status::error("short payload");
    return Status::ok();
  });
  WfbpScheduler sched(env.plan, env.engine, failing);
  sched.begin_step(4);
  report_backward(env.stack, sched);
  sched.on_backward_done();
  ::sparq::testing::LogCapture log;
  try {
    (void)sched.wait_all();
    ADD_FAILURE() << "wait_all() did not rethrow the exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "decoder threw");
  }
  EXPECT_NE(log.text().find("bucket 0 of step 4: corrupt message"), std::string::npos)
      << log.text();
  // Buckets after the one that threw are not run (Note [A task that threw ends the queue],
  // comm_queue.h): one line for all of them.
  EXPECT_EQ(log.text().find("short payload"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("later task(s) not run after a task threw"), std::string::npos)
      << log.text();
  EXPECT_TRUE(env.engine.wait_all().is_ok()) << "each failure is reported once";
  // Without an exception the first failure is returned and the others are logged; on a new
  // engine, since the first ran nothing more after its throw.
  FunctionAverager refusing([](Communicator&, const Bucket& b, std::int64_t) {
    return b.index <= 1 ? Status::error("bucket {} refused", b.index) : Status::ok();
  });
  CommEngine fresh(*env.self, CommEngine::Options{});
  WfbpScheduler second(env.plan, fresh, refusing);
  second.begin_step(5);
  report_backward(env.stack, second);
  second.on_backward_done();
  ::sparq::testing::LogCapture second_log;
  const Status st = second.wait_all();
  const bool zero_first = st.message() == "bucket 0 of step 5: bucket 0 refused";
  EXPECT_TRUE(zero_first || st.message() == "bucket 1 of step 5: bucket 1 refused") << st.message();
  EXPECT_NE(second_log.text().find(zero_first ? "bucket 1 refused" : "bucket 0 refused"),
            std::string::npos)
      << second_log.text();
}

TEST(WfbpSchedulerDeathTest, MissingOrDuplicateGradientsAbort) {
  SchedulerEnv env(1);
  Stack& s = env.stack;
  const BucketPlan& plan = env.plan;
  CommEngine& engine = env.engine;
  Recorder rec;
  WfbpScheduler sched(plan, engine, rec);
  EXPECT_DEATH(
      {
        sched.begin_step(0);
        sched.on_grads_ready(s.store.entry("ln_f.bias").range());
        sched.on_backward_done();
      },
      "did not report every parameter");
  // A bucket that receives more elements than it holds had a tensor reported twice.
  EXPECT_DEATH(
      {
        sched.begin_step(0);
        report_backward(s, sched);
        sched.on_grads_ready(s.store.entry("ln_f.bias").range());
      },
      "reported twice");
  // A step begun before the last one's buckets were waited for: they may still be averaging
  // the gradients its backward overwrites.
  EXPECT_DEATH(
      {
        sched.begin_step(1);
        report_backward(s, sched);
        sched.on_backward_done();
        sched.begin_step(2);
      },
      "begin_step\\(2\\) before wait_all\\(\\) of step 1");
}

}  // namespace
}  // namespace sparq::comm
