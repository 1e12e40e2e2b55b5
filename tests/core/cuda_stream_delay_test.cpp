// The stream delay behind the emulated link on the GPU (core/cuda/stream_delay.h): it holds
// its own stream for at least the time asked, and only that stream, so backward kernels on
// the compute stream run while a bucket's emulated transfer is in flight. Timing bounds are
// one-sided where the GPU may be slow (a shared machine) and generous where it may be late.
#include <gtest/gtest.h>

#include "common/device_test_util.h"

#ifdef SPARQ_HAS_CUDA
#include "core/buffer.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_handles.h"
#include "core/cuda/cuda_ops.h"
#include "core/cuda/stream_delay.h"
#endif

namespace sparq {
namespace {

TEST(CudaStreamDelay, HoldsItsStreamForTheTimeAsked) {
  SPARQ_SKIP_WITHOUT_GPU();
#ifdef SPARQ_HAS_CUDA
  cuda::Stream stream;
  for (double ms : {0.5, 3.0, 12.0}) {
    cuda::Event before(/*timing=*/true), after(/*timing=*/true);
    before.record(stream.get());
    cuda::enqueue_stream_delay(ms * 1e3, stream.get());
    after.record(stream.get());
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    const float elapsed = after.elapsed_ms_since(before);
    // At least the time asked; no upper bound: how late it ends is the device's scheduling,
    // and a test asserts no timing it does not own (a busy shared GPU would fail it).
    EXPECT_GE(elapsed, ms * 0.999) << ms << " ms asked";
  }
  // Nothing asked, nothing enqueued: the idle stream has no work pending right after.
  cuda::enqueue_stream_delay(0.0, stream.get());
  cuda::enqueue_stream_delay(-5.0, stream.get());
  EXPECT_EQ(cudaStreamQuery(stream.get()), cudaSuccess);
#endif
}

TEST(CudaStreamDelay, OtherStreamsRunMeanwhile) {
  SPARQ_SKIP_WITHOUT_GPU();
#ifdef SPARQ_HAS_CUDA
  cuda::Stream link, compute;
  Buffer x = Buffer::device(1 << 20);
  cuda::Event delay_done(/*timing=*/true), compute_done(/*timing=*/true);
  cuda::enqueue_stream_delay(200e3, link.get());  // 200 ms
  delay_done.record(link.get());
  // Work on the other stream, enqueued after the delay: it must finish long before it.
  for (int i = 0; i < 10; ++i) {
    cuda::fill(static_cast<float*>(x.data()), (1 << 20) / 4, 1.0f * i, compute.get());
  }
  compute_done.record(compute.get());
  CUDA_CHECK(cudaStreamSynchronize(compute.get()));
  // The order of the two events, not a time between them: the delay still runs when the
  // compute stream is done.
  EXPECT_FALSE(delay_done.ready()) << "the compute stream waited for the delayed stream";
  CUDA_CHECK(cudaStreamSynchronize(link.get()));
  EXPECT_GT(delay_done.elapsed_ms_since(compute_done), 0.0);
#endif
}

}  // namespace
}  // namespace sparq
