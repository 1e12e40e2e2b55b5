// CommEngine over the MPI backend under mpirun 1-4: many collectives in flight complete in
// FIFO order with exact results, the engine works while the caller's thread computes, and a
// task failing on one rank surfaces there without stalling later collectives; a traced
// task's span carries the bytes its collectives put on the wire.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "comm/byte_model.h"
#include "comm/comm_engine.h"
#include "comm/mpi_communicator.h"
#include "comm_test_util.h"
#include "core/log.h"
#include "core/timer.h"
#include "core/trace.h"

namespace sparq::comm {
namespace {

using testing::make_comm;

TEST(MpiCommEngine, ManyCollectivesInFlightCompleteInFifoOrder) {
  auto comm = make_comm();
  CommEngine engine(*comm, {.timeout_s = 60});
  const int rank = comm->rank(), size = comm->size();
  constexpr int kTasks = 200;
  constexpr std::size_t kLen = 257;
  std::vector<std::vector<float>> buffers(kTasks, std::vector<float>(kLen));
  std::vector<int> order;
  std::vector<CommHandle> handles;
  // The head task holds the queue until everything is submitted, so all kTasks are in flight
  // at once whatever the speed of this rank.
  std::atomic<bool> all_submitted{false};
  handles.push_back(engine.submit("gate", -1, [&](Communicator&) {
    while (!all_submitted.load()) std::this_thread::yield();
  }));
  for (int t = 0; t < kTasks; ++t) {
    for (std::size_t i = 0; i < kLen; ++i) {
      buffers[t][i] = static_cast<float>(testing::value_at(rank, i + t));
    }
    // Alternate collectives so that an out-of-order execution would mismatch across ranks.
    handles.push_back(engine.submit("task " + std::to_string(t), t, [&, t](Communicator& c) {
      order.push_back(t);
      if (t % 2 == 0) {
        c.allreduce(buffers[t].data(), buffers[t].data(), kLen, DType::kF32, ReduceOp::kSum);
      } else {
        c.broadcast(buffers[t].data(), kLen, DType::kF32, t % c.size());
      }
    }));
  }
  EXPECT_EQ(engine.in_flight(), static_cast<std::size_t>(kTasks) + 1);
  all_submitted = true;
  ASSERT_TRUE(engine.wait_all().is_ok());
  handles.erase(handles.begin());
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kTasks));
  for (int t = 0; t < kTasks; ++t) {
    EXPECT_EQ(order[t], t);
    const auto expected = t % 2 == 0 ? testing::summed_values(size, kLen, t)
                                     : testing::rank_values(t % size, kLen, t);
    for (std::size_t i = 0; i < kLen; ++i) ASSERT_EQ(buffers[t][i], expected[i]) << "task " << t;
    if (t > 0) {
      EXPECT_GE(handles[t].times().start_us, handles[t - 1].times().end_us);
    }
  }
}

TEST(MpiCommEngine, CollectivesProgressWhileTheCallerComputes) {
  auto comm = make_comm();
  CommEngine engine(*comm, {.timeout_s = 60});
  std::atomic<bool> first_collective_done{false}, caller_finished{false};
  std::vector<float> grads(1 << 16, 1.0f);
  CommHandle handle = engine.submit("overlapped", 0, [&](Communicator& c) {
    c.allreduce(grads.data(), grads.data(), grads.size(), DType::kF32, ReduceOp::kSum);
    first_collective_done = true;
    // The second collective only starts once the caller is done: a task that ran on the
    // caller's thread (inside wait) would never see that flag set.
    while (!caller_finished.load()) std::this_thread::yield();
    c.allreduce(grads.data(), grads.data(), grads.size(), DType::kF32, ReduceOp::kAvg);
  });
  // Compute on this thread until the engine has finished a collective on its own; the bound
  // only turns "the engine makes no progress without wait()" into a failure, not a hang.
  Stopwatch clock;
  std::vector<double> activations(1 << 12);
  double sum = 0.0;
  long rounds = 0;
  do {
    std::iota(activations.begin(), activations.end(), static_cast<double>(rounds++));
    sum += std::accumulate(activations.begin(), activations.end(), 0.0);
  } while (!first_collective_done.load() && clock.seconds() < 30.0);
  EXPECT_TRUE(first_collective_done.load()) << "the engine made no progress while this thread "
                                               "computed ("
                                            << rounds << " rounds)";
  EXPECT_FALSE(handle.done());
  caller_finished = true;
  ASSERT_TRUE(engine.wait(handle).is_ok());
  spdlog::debug("caller computed {} rounds (sum {}) while the engine communicated", rounds, sum);
  for (float g : grads) ASSERT_EQ(g, static_cast<float>(comm->size()));
}

// The rank that threw runs no later task (Note [A task that threw ends the queue],
// comm_queue.h), so the next one here touches no peer: the others run it, that rank says why
// it did not.
TEST(MpiCommEngine, FailureOnOneRankSurfacesThereAndEndsItsQueueOnly) {
  auto comm = make_comm();
  CommEngine engine(*comm, {.timeout_s = 60});
  const int rank = comm->rank(), size = comm->size();
  int value = rank + 1;
  CommHandle first = engine.submit("decode bucket 1", 9, [&](Communicator& c) {
    c.allreduce(&value, &value, 1, DType::kI32, ReduceOp::kSum);
    if (c.rank() == c.size() - 1) {
      throw std::runtime_error("rank " + std::to_string(c.rank()) + ": corrupt message");
    }
  });
  int second = 0;
  CommHandle next = engine.submit("count bucket 2", 9, [&](Communicator&) { second = 1; });
  if (rank == size - 1) {
    try {
      (void)engine.wait(first);
      ADD_FAILURE() << "the exception did not reach wait()";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "rank " + std::to_string(rank) + ": corrupt message");
    }
  } else {
    EXPECT_TRUE(engine.wait(first).is_ok());
  }
  const Status next_status = engine.wait(next);
  EXPECT_EQ(value, size * (size + 1) / 2);
  if (rank == size - 1) {
    EXPECT_NE(next_status.message().find("not run: task 'decode bucket 1' (step 9) threw"),
              std::string::npos)
        << next_status.message();
    EXPECT_EQ(second, 0);
  } else {
    EXPECT_TRUE(next_status.is_ok()) << next_status.message();
    EXPECT_EQ(second, 1);
  }
}

// The span of a traced task holds what its collectives sent from this rank: two ring
// allreduces of different sizes in one task, by the ring model (byte_model.h), and 0 on a
// world of one (the self-communicator test's only case).
TEST(MpiCommEngine, TraceSpansCarryTheBytesSentOnTheWire) {
  auto comm = make_comm();
  TraceRecorder trace;
  trace.enable(true);
  CommEngine engine(*comm, {.timeout_s = 60, .name = "traced", .trace = &trace});
  const int rank = comm->rank(), size = comm->size();
  std::vector<float> a(1003, 1.0f), b(40, 2.0f);
  ASSERT_TRUE(engine
                  .run("allreduce buckets 0-1", 5,
                       [&](Communicator& c) {
                         c.allreduce(a.data(), a.data(), a.size(), DType::kF32, ReduceOp::kSum);
                         c.allreduce(b.data(), b.data(), b.size(), DType::kF32, ReduceOp::kSum);
                         return Status::ok();
                       })
                  .is_ok());
  ASSERT_TRUE(engine
                  .run("allreduce bucket 2", 6,
                       [&](Communicator& c) {
                         c.allreduce(b.data(), b.data(), b.size(), DType::kF32, ReduceOp::kSum);
                         return Status::ok();
                       })
                  .is_ok());
  const auto spans = trace.spans();
  ASSERT_EQ(spans.size(), 2u);
  const std::uint64_t want = ring_allreduce_bytes(a.size(), 4, rank, size).sent +
                             ring_allreduce_bytes(b.size(), 4, rank, size).sent;
  EXPECT_EQ(spans[0].bytes, static_cast<std::int64_t>(want));
  EXPECT_EQ(spans[1].bytes,
            static_cast<std::int64_t>(ring_allreduce_bytes(b.size(), 4, rank, size).sent));
  if (size > 1) {
    EXPECT_GT(spans[0].bytes, 0);
  }
  EXPECT_EQ(a[0], static_cast<float>(size));
}

}  // namespace
}  // namespace sparq::comm
