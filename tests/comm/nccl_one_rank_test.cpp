// One rank of NCCL without MPI (label gpu; skipped without NCCL or a device): the
// communicator bootstrapped over the self communicator, as the trainer does for one GPU; its
// collectives are exact; the emulated link spends its time on the NCCL stream, priced in an
// emulated world of several ranks (EmulatedLink::ranks: the byte model's bytes for rank 0 of
// that world); the stream engine times tasks by the GPU; a mark on the producer stream
// resolves to when the GPU got there, not when the host enqueued the work; drain() returns
// only once the stream's queued work is done, and ends the job naming the wait when that
// takes longer than the communicator's timeout.
#include <gtest/gtest.h>

#include <vector>

#include "comm/communicator.h"
#include "comm/emulated_link.h"
#include "common/device_test_util.h"
#include "core/buffer.h"
#include "core/timer.h"

#ifdef SPARQ_HAS_NCCL
#include "comm/byte_model.h"
#include "comm/nccl_communicator.h"
#include "comm/stream_engine.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_handles.h"
#include "core/cuda/cuda_ops.h"
#include "core/cuda/stream_delay.h"
#include "core/cuda/sync_copy.h"
#endif

namespace sparq::comm {
namespace {

#ifdef SPARQ_HAS_NCCL
#define SKIP_WITHOUT_NCCL_GPU() SPARQ_SKIP_WITHOUT_GPU()
std::vector<float> download(const Buffer& b, std::size_t n) {
  std::vector<float> host(n);
  cuda::copy_synchronously(host.data(), b.data(), n * 4);  // after the NCCL stream's work
  return host;
}
Buffer upload(const std::vector<float>& host) {
  Buffer b = Buffer::device(host.size() * 4 + 4);
  cuda::copy_synchronously(b.data(), host.data(), host.size() * 4);
  return b;
}
std::unique_ptr<NcclCommunicator> one_rank(NcclOptions options = {}) {
  auto self = make_self_communicator();
  auto made = make_nccl_communicator(*self, options);
  EXPECT_TRUE(made.is_ok()) << made.status().message();
  return made.is_ok() ? std::move(made).value() : nullptr;
}
#else
#define SKIP_WITHOUT_NCCL_GPU() GTEST_SKIP() << "sparq was built without NCCL: skipped"
#endif

TEST(NcclOneRank, BootstrapsWithoutMpiAndIsExact) {
  SKIP_WITHOUT_NCCL_GPU();
#ifdef SPARQ_HAS_NCCL
  auto comm = one_rank();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->backend(), "nccl");
  std::vector<float> x(1001);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 7.3f;
  Buffer d = upload(x), out = Buffer::device(x.size() * 4);
  comm->allreduce(d.data(), d.data(), x.size(), DType::kF32, ReduceOp::kAvg);
  EXPECT_EQ(download(d, x.size()), x);  // the mean of one rank is its own values, bit for bit
  comm->allgather(d.data(), out.data(), x.size(), DType::kF32);
  EXPECT_EQ(download(out, x.size()), x);
  EXPECT_EQ(comm->bytes().sent, 0u);  // a world of one moves nothing
#endif
}

TEST(NcclOneRank, EmulatedWorldPricesBytesAndTimeOnTheStream) {
  SKIP_WITHOUT_NCCL_GPU();
#ifdef SPARQ_HAS_NCCL
  const EmulatedLink link{.gbit_per_s = 2.0, .latency_us = 50.0, .ranks = 4};
  auto comm = one_rank({.emulate = link});
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->backend(), "nccl+emulated-link");
  const std::size_t n = 1 << 20;  // 4 MiB: 6 MiB on the wire each way at 4 ranks
  Buffer d = Buffer::device(n * 4);
  cuda::fill(static_cast<float*>(d.data()), n, 1.5f, comm->stream());

  const WireBytes want = ring_allreduce_bytes(n, 4, /*rank=*/0, /*size=*/4);
  cuda::Event before(/*timing=*/true), after(/*timing=*/true);
  before.record(comm->stream());
  comm->allreduce(d.data(), d.data(), n, DType::kF32, ReduceOp::kSum);  // synchronous
  after.record(comm->stream());
  CUDA_CHECK(cudaStreamSynchronize(comm->stream()));
  EXPECT_EQ(comm->bytes().sent, want.sent);
  EXPECT_EQ(comm->bytes().received, want.received);
  const double want_ms = link.call_us(want) / 1e3;  // about 25 ms
  EXPECT_GT(want_ms, 20.0);
  EXPECT_GE(after.elapsed_ms_since(before), want_ms * 0.999);
  EXPECT_EQ(download(d, 4), std::vector<float>(4, 1.5f));  // the data is still one rank's

  // An allgather of one rank's block is priced as four ranks' blocks.
  const std::size_t before_sent = comm->bytes().sent;
  Buffer gathered = Buffer::device(1000 * 4);
  comm->allgather(d.data(), gathered.data(), 1000, DType::kF32);
  const std::vector<std::size_t> blocks(4, 1000);
  EXPECT_EQ(comm->bytes().sent - before_sent, ring_allgatherv_bytes(blocks, 4, 0).sent);
#endif
}

// Communicator::drain, the bounded wait the GPU exchanges use before freeing a buffer the
// stream may still read: 200 ms of queued work is finished when it returns (no further
// synchronisation before the query), and work longer than the timeout ends the job.
TEST(NcclOneRank, DrainWaitsForQueuedWorkAndIsBounded) {
  SKIP_WITHOUT_NCCL_GPU();
#ifdef SPARQ_HAS_NCCL
  auto comm = one_rank();
  ASSERT_NE(comm, nullptr);
  Buffer d = Buffer::device(4096 * 4);
  cuda::enqueue_stream_delay(200e3, comm->stream());
  cuda::fill(static_cast<float*>(d.data()), 4096, 2.5f, comm->stream());
  comm->drain("the test's queued work");
  EXPECT_EQ(cudaStreamQuery(comm->stream()), cudaSuccess);
  EXPECT_EQ(download(d, 3), std::vector<float>(3, 2.5f));

  EXPECT_DEATH(
      {
        // The timeout also bounds the communicator's start, so it leaves room for that.
        NcclOptions bounded;
        bounded.timeout_s = 5;
        auto quick = one_rank(bounded);
        cuda::enqueue_stream_delay(60e6, quick->stream());
        quick->drain("the test's slow work");
      },
      "the test's slow work did not complete within 5 s; communicator aborted");
#endif
}

TEST(NcclOneRank, StreamEngineTimesTasksAndMarksOnTheGpu) {
  SKIP_WITHOUT_NCCL_GPU();
#ifdef SPARQ_HAS_NCCL
  const EmulatedLink link{.gbit_per_s = 4.0, .ranks = 8};
  auto comm = one_rank({.emulate = link});
  ASSERT_NE(comm, nullptr);
  cuda::Stream compute;
  StreamCommEngine engine(*comm, {.name = "one rank", .producer = compute.get()});
  const std::size_t n = 1 << 19;
  Buffer d = Buffer::device(n * 4);
  cuda::fill(static_cast<float*>(d.data()), n, 2.0f, compute.get());
  // The producer is held 30 ms on the GPU before the task may start: the host has long
  // enqueued everything by then.
  cuda::enqueue_stream_delay(30e3, compute.get());
  const std::int64_t host_at_mark = now_us();
  const CommQueue::Mark mark = engine.mark_producer();
  CommHandle task = engine.submit("bucket", 0, [&](Communicator& c) {
    c.allreduce(d.data(), d.data(), n, DType::kF32, ReduceOp::kAvg);
  });
  ASSERT_TRUE(engine.wait(task).is_ok());
  const std::int64_t producer_done = mark();
  EXPECT_GE(producer_done - host_at_mark, 29'000) << "the mark resolved to the host's time";
  const TaskTimes t = task.times();
  EXPECT_GE(t.start_us, producer_done - 50);  // gated on the producer (anchor rounding aside)
  const double priced_us = link.call_us(task.bytes());
  EXPECT_EQ(task.bytes().sent, ring_allreduce_bytes(n, 4, 0, 8).sent);
  EXPECT_GE(static_cast<double>(t.end_us - t.start_us), priced_us * 0.99);
  EXPECT_EQ(download(d, 3), std::vector<float>(3, 2.0f));
  ASSERT_TRUE(engine.wait_all().is_ok());
#endif
}

}  // namespace
}  // namespace sparq::comm
