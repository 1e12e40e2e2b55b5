// StreamCommEngine under mpirun, on NCCL: exact results of many tasks in flight, FIFO order on
// the communicator's stream, gating by the producer stream (and of a consumer stream on a
// task), failures reported at wait with their message, ordered times, bytes and trace spans.
// Skips with a message when sparq was built without NCCL or a rank has no CUDA device of its
// own (as on CI), exactly like nccl_test.cpp: the decision is collective so that no rank
// enters NCCL init alone.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm_test_util.h"
#include "core/buffer.h"

#ifdef SPARQ_HAS_NCCL
#include <chrono>
#include <thread>

#include "comm/byte_model.h"
#include "comm/nccl_communicator.h"
#include "comm/stream_engine.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/sync_copy.h"
#include "core/trace.h"
#include "nccl_skip.h"
#endif

namespace sparq::comm {
namespace {

#ifdef SPARQ_HAS_NCCL
// Small integers as `dtype` elements in a new device buffer, and back (exact in every dtype).
Buffer to_device(DType dtype, const std::vector<double>& values) {
  const std::vector<char> bytes = testing::encode(dtype, values);
  Buffer device = Buffer::device(bytes.size() + 1);  // + 1: never a zero-byte allocation
  cuda::copy_synchronously(device.data(), bytes.data(), bytes.size());
  return device;
}
std::vector<double> from_device(DType dtype, const void* device, std::size_t count) {
  std::vector<char> bytes(count * dtype_size(dtype));
  cuda::copy_synchronously(bytes.data(), device, bytes.size());
  return testing::decode(dtype, bytes.data(), count);
}

// Expects `call` to rethrow exactly the task's exception: type E and its original message.
template <typename E, typename F>
void expect_rethrown(F&& call, const char* message) {
  try {
    (void)call();
    ADD_FAILURE() << "no exception; expected '" << message << "'";
  } catch (const E& e) {
    EXPECT_STREQ(e.what(), message);
  }
}

// Holds a stream back on the host for `*ms` milliseconds: whatever follows on that stream
// (a write of a collective's input, or the gated collective itself) is then late for sure.
void CUDART_CB sleep_ms(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<const int*>(ms)));
}
int kStall = 100;

#endif

class StreamCommEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int have_gpu = cuda_available() ? 1 : 0, all_have = 0;
    MPI_Allreduce(&have_gpu, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
#ifndef SPARQ_HAS_NCCL
    skip_ = "sparq was built without NCCL: skipped";
#else
    if (!all_have) {
      skip_ = "no CUDA device on some rank: NCCL stream engine test skipped";
      return;
    }
    auto bootstrap = make_mpi_communicator();
    ASSERT_TRUE(bootstrap.is_ok()) << bootstrap.status().message();
    bootstrap_ = std::move(bootstrap).value();
    const bool too_few_gpus = testing::fewer_gpus_than_ranks_on_this_node();
    auto made = make_nccl_communicator(*bootstrap_);
    if (!made.is_ok()) {
      (too_few_gpus ? skip_ : failure_) = made.status().message();
      return;
    }
    nccl_ = std::move(made).value();
#endif
  }
  static void TearDownTestSuite() {
#ifdef SPARQ_HAS_NCCL
    nccl_.reset();  // before the bootstrap, and both before MPI_Finalize in main()
#endif
    bootstrap_.reset();
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    if (!failure_.empty()) FAIL() << "the NCCL communicator was not built: " << failure_;
  }

  static inline std::string skip_, failure_;
  static inline std::unique_ptr<Communicator> bootstrap_;
#ifdef SPARQ_HAS_NCCL
  static inline std::unique_ptr<NcclCommunicator> nccl_;
#endif
};

#ifdef SPARQ_HAS_NCCL

TEST_F(StreamCommEngineTest, ManyAllreducesInFlightAreExactWithBytesAndOrderedTimes) {
  NcclCommunicator& comm = *nccl_;
  const int rank = comm.rank(), size = comm.size();
  cuda::Stream compute;
  constexpr int kTasks = 48;
  constexpr std::size_t kCount = 1001;  // odd: uneven ring blocks
  std::vector<Buffer> inputs, outputs;
  std::vector<StreamCommHandle> handles;
  {
    StreamCommEngine engine(comm, {.timeout_s = 60, .name = "grads"});
    EXPECT_FALSE(comm.synchronous()) << "the engine needs enqueue-only calls";
    for (int i = 0; i < kTasks; ++i) {
      const DType dtype = testing::kFloatDTypes[i % 3];
      inputs.push_back(to_device(dtype, testing::rank_values(rank, kCount, i)));
      outputs.push_back(Buffer::device(kCount * dtype_size(dtype) + 1));
      const void* in = inputs.back().data();
      void* out = outputs.back().data();
      handles.push_back(engine.submit(
          "allreduce bucket " + std::to_string(i), 5,
          [=](NcclCommunicator& c) { c.allreduce(in, out, kCount, dtype, ReduceOp::kSum); },
          compute.get()));
    }
    // Waiting out of order is fine: the FIFO only fixes the order on the stream.
    ASSERT_TRUE(engine.wait(handles[kTasks / 2]).is_ok());
    ASSERT_TRUE(engine.wait_all().is_ok());
    EXPECT_EQ(engine.in_flight(), 0u);
  }
  EXPECT_TRUE(comm.synchronous()) << "the engine restores the communicator's mode";
  for (int i = 0; i < kTasks; ++i) {
    const DType dtype = testing::kFloatDTypes[i % 3];
    EXPECT_EQ(from_device(dtype, outputs[i].data(), kCount),
              testing::summed_values(size, kCount, i))
        << dtype_name(dtype) << " task " << i;
    const StreamCommHandle& h = handles[i];
    EXPECT_TRUE(h.done());
    EXPECT_EQ(h.sequence(), static_cast<std::uint64_t>(i));
    EXPECT_EQ(h.step(), 5);
    const WireBytes expected = ring_allreduce_bytes(kCount, dtype_size(dtype), rank, size);
    EXPECT_EQ(h.bytes().sent, expected.sent);
    EXPECT_EQ(h.bytes().received, expected.received);
    const TaskTimes t = h.times();
    EXPECT_GT(t.enqueue_us, 0);
    EXPECT_LE(t.enqueue_us, t.start_us);
    EXPECT_LE(t.start_us, t.end_us);
    if (i > 0) {
      EXPECT_GE(t.start_us, handles[i - 1].times().end_us) << "tasks overlapped";
    }
  }
}

TEST_F(StreamCommEngineTest, EachTaskReadsThePreviousTasksOutputInFifoOrder) {
  NcclCommunicator& comm = *nccl_;
  const int size = comm.size();
  constexpr int kTasks = 12;  // slot j ends at size^(kTasks - j) <= 2^12
  std::vector<Buffer> chain;
  for (int i = 0; i <= kTasks; ++i) chain.push_back(Buffer::device(kTasks * 4, /*zeroed=*/true));
  CUDA_CHECK(cudaDeviceSynchronize());
  cuda::Stream stalled;
  StreamCommEngine engine(comm, {.timeout_s = 60, .name = "chain"});
  // Task 0 waits for a stalled producer; the rest are not gated at all (their producer is
  // the engine's own stream), so only the FIFO keeps them behind it.
  CUDA_CHECK(cudaLaunchHostFunc(stalled.get(), sleep_ms, &kStall));
  for (int i = 0; i < kTasks; ++i) {
    const void* prev = chain[i].data();
    auto* next = chain[i + 1].as<std::int32_t>();
    engine.submit(
        "chain " + std::to_string(i), i,
        [=](NcclCommunicator& c) {
          CUDA_CHECK(cudaMemcpyAsync(next, prev, kTasks * 4, cudaMemcpyDeviceToDevice, c.stream()));
          // Marks slot i with 1 (its lowest byte; the slot was 0 until now).
          CUDA_CHECK(cudaMemsetAsync(next + i, 1, 1, c.stream()));
          c.allreduce(next, next, kTasks, DType::kI32, ReduceOp::kSum);
        },
        i == 0 ? stalled.get() : engine.stream());
  }
  ASSERT_TRUE(engine.wait_all().is_ok());
  for (int i = 1; i <= kTasks; ++i) {
    const auto got = from_device(DType::kI32, chain[i].data(), kTasks);
    for (int j = 0; j < kTasks; ++j) {
      double expected = 0;
      if (j < i) {
        expected = 1;
        for (int k = j; k < i; ++k) expected *= size;
      }
      EXPECT_EQ(got[j], expected) << "after task " << i - 1 << ", slot " << j;
    }
  }
}

TEST_F(StreamCommEngineTest, ProducerStreamGatesTheTaskAndTheTaskGatesAConsumer) {
  NcclCommunicator& comm = *nccl_;
  const int rank = comm.rank(), size = comm.size();
  constexpr std::size_t kBytes = 4099;
  Buffer data = Buffer::device(kBytes, /*zeroed=*/true);
  Buffer copy = Buffer::device(kBytes, /*zeroed=*/true);
  CUDA_CHECK(cudaDeviceSynchronize());
  cuda::Stream compute, consumer;
  StreamCommEngine engine(comm, {.timeout_s = 60, .name = "gated"});
  // The input is written late on the compute stream; only the gate makes the collective see
  // it. The consumer copies the result without the host waiting for the task.
  CUDA_CHECK(cudaLaunchHostFunc(compute.get(), sleep_ms, &kStall));
  CUDA_CHECK(cudaMemsetAsync(data.data(), rank + 1, kBytes, compute.get()));
  void* d = data.data();
  StreamCommHandle h = engine.submit(
      "gated allreduce", 0,
      [=](NcclCommunicator& c) { c.allreduce(d, d, kBytes, DType::kU8, ReduceOp::kSum); },
      compute.get());
  // (No check that the task is still pending here: that would depend on timing.)
  engine.wait_on_stream(h, consumer.get());
  CUDA_CHECK(cudaMemcpyAsync(copy.data(), d, kBytes, cudaMemcpyDeviceToDevice, consumer.get()));
  consumer.synchronize();
  EXPECT_TRUE(h.done()) << "the consumer finished, so the task it waited on has";
  const std::vector<double> expected(kBytes, size * (size + 1) / 2);
  EXPECT_EQ(from_device(DType::kU8, copy.data(), kBytes), expected);
  ASSERT_TRUE(engine.wait(h).is_ok());
  EXPECT_EQ(from_device(DType::kU8, d, kBytes), expected);
}

TEST_F(StreamCommEngineTest, FailuresReachTheWaiterWithTheirMessage) {
  NcclCommunicator& comm = *nccl_;
  cuda::Stream compute;
  Buffer x = to_device(DType::kF32, {1.0});
  void* px = x.data();
  StreamCommEngine engine(comm, {.timeout_s = 60, .name = "errors"});
  StreamCommHandle failing = engine.submit(
      "status task", 3,
      [](NcclCommunicator&) { return Status::error("bucket {} could not be encoded", 3); },
      compute.get());
  StreamCommHandle throwing = engine.submit(
      "throwing task", 4,
      [](NcclCommunicator&) { throw std::invalid_argument("decoder saw 17 bytes, expected 24"); },
      compute.get());
  StreamCommHandle after = engine.submit(
      "after", 5, [=](NcclCommunicator& c) { c.allreduce(px, px, 1, DType::kF32, ReduceOp::kSum); },
      compute.get());
  EXPECT_EQ(engine.wait(failing).message(), "bucket 3 could not be encoded");
  expect_rethrown<std::invalid_argument>([&] { return engine.wait(throwing); },
                                         "decoder saw 17 bytes, expected 24");
  // Note [A task that threw ends the queue] (comm_queue.h): nothing runs after the throw.
  const Status not_run = engine.wait(after);
  EXPECT_NE(not_run.message().find("not run: task 'throwing task' (step 4) threw before it"),
            std::string::npos)
      << not_run.message();
  EXPECT_EQ(from_device(DType::kF32, px, 1), std::vector<double>{1.0});  // not reduced
  EXPECT_TRUE(engine.wait_all().is_ok()) << "failures already reported by wait()";

  StreamCommEngine second(comm, {.timeout_s = 60, .name = "errors 2"});
  second.submit(
      "unwaited failure", 6, [](NcclCommunicator&) { return Status::error("lost bucket"); },
      compute.get());
  EXPECT_EQ(second.wait_all().message(), "lost bucket");
  second.submit(
      "unwaited throw", 7, [](NcclCommunicator&) { throw std::runtime_error("bad payload"); },
      compute.get());
  expect_rethrown<std::runtime_error>([&] { return second.wait_all(); }, "bad payload");
}

TEST_F(StreamCommEngineTest, RecordsTraceSpansWithBytesOnceWaited) {
  NcclCommunicator& comm = *nccl_;
  const int rank = comm.rank(), size = comm.size();
  TraceRecorder trace;
  trace.enable(true);
  cuda::Stream compute;
  Buffer x = Buffer::device(256 * 4, /*zeroed=*/true);
  CUDA_CHECK(cudaDeviceSynchronize());
  void* px = x.data();
  StreamCommEngine engine(comm, {.timeout_s = 60, .name = "traced", .trace = &trace});
  for (int i = 0; i < 3; ++i) {
    engine.submit(
        "allreduce bucket " + std::to_string(i), 11,
        [=](NcclCommunicator& c) { c.allreduce(px, px, 256, DType::kF32, ReduceOp::kAvg); },
        compute.get());
  }
  EXPECT_TRUE(trace.spans().empty()) << "times are known only once a task is waited for";
  ASSERT_TRUE(engine.wait_all().is_ok());
  const auto spans = trace.spans();
  ASSERT_EQ(spans.size(), 3u);
  const WireBytes expected = ring_allreduce_bytes(256, 4, rank, size);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(spans[i].name, "allreduce bucket " + std::to_string(i));
    EXPECT_EQ(spans[i].category, "comm");
    EXPECT_EQ(spans[i].step, 11);
    EXPECT_EQ(spans[i].lane, TraceLane::kCommunication);
    EXPECT_EQ(spans[i].bytes, static_cast<std::int64_t>(expected.sent));
    EXPECT_LE(spans[i].start_us, spans[i].end_us);
  }
  // After wait_all the engine re-anchors its clock; a later task is timed against the new one.
  StreamCommHandle later = engine.submit(
      "later", 12,
      [=](NcclCommunicator& c) { c.allreduce(px, px, 256, DType::kF32, ReduceOp::kAvg); },
      compute.get());
  ASSERT_TRUE(engine.wait(later).is_ok());
  const TaskTimes t = later.times();
  EXPECT_LE(t.enqueue_us, t.start_us);
  EXPECT_LE(t.start_us, t.end_us);
  EXPECT_EQ(trace.spans().size(), 4u);
}

#else

TEST_F(StreamCommEngineTest, SkippedWithoutNccl) {}

#endif

}  // namespace
}  // namespace sparq::comm
