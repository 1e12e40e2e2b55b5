// CUDA core tests: device buffers, streams/events, the cuBLAS GEMM against the CPU GEMM and
// the flat kernels against core/ops. Every test skips with a message when sparq was built
// without CUDA or no device is visible (as on CI).
#include <gtest/gtest.h>

#include <vector>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/param_store.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "common/device_test_util.h"

#ifdef SPARQ_HAS_CUDA
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_gemm.h"
#include "core/cuda/cuda_ops.h"
#include "core/cuda/device_resources.h"
#include "core/cuda/sync_copy.h"
#endif

namespace sparq {
namespace {

#ifdef SPARQ_HAS_CUDA
void upload(const std::vector<float>& host, const Buffer& dev) {
  cuda::copy_synchronously(dev.data(), host.data(), host.size() * 4);
}
std::vector<float> download(const Buffer& dev, std::size_t n) {
  std::vector<float> host(n);
  cuda::copy_synchronously(host.data(), dev.data(), n * 4);
  return host;
}
#endif

TEST(CudaCore, GemmMatchesCpuForEveryTranspose) {
  SPARQ_SKIP_WITHOUT_GPU();
#ifdef SPARQ_HAS_CUDA
  cuda::CublasHandle handle;
  cuda::Stream stream;
  handle.set_stream(stream.get());
  const std::int64_t m = 67, n = 45, k = 129;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      GemmShape s{ta == 1, tb == 1, m, n, k};
      std::vector<float> a(m * k), b(k * n), c(m * n);
      fill_uniform(a.data(), a.size(), -1, 1, 3, 1);
      fill_uniform(b.data(), b.size(), -1, 1, 3, 2);
      fill_uniform(c.data(), c.size(), -1, 1, 3, 3);
      Buffer da = Buffer::device(a.size() * 4), db = Buffer::device(b.size() * 4),
             dc = Buffer::device(c.size() * 4);
      upload(a, da);
      upload(b, db);
      upload(c, dc);
      cuda::gemm(handle, s, 1.5f, da.as<float>(), db.as<float>(), 0.5f, dc.as<float>());
      stream.synchronize();
      gemm(s, 1.5f, a.data(), b.data(), 0.5f, c.data());
      const auto got = download(dc, c.size());
      for (std::size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(got[i], c[i], 1e-3f) << ta << tb;
    }
  }
  // Empty products as the CPU's (static review, 2026-12-06: a zero leading dimension was
  // CUBLAS_STATUS_INVALID_VALUE): k = 0 scales C by beta, m = 0 touches nothing.
  for (const GemmShape& s : {GemmShape{false, false, 3, 4, 0}, GemmShape{true, false, 3, 4, 0},
                             GemmShape{false, true, 0, 4, 5}}) {
    std::vector<float> c(std::max<std::int64_t>(s.m, 1) * s.n, 2.0f);
    Buffer dc = Buffer::device(c.size() * 4), dummy = Buffer::device(64 * 4);
    upload(c, dc);
    cuda::gemm(handle, s, 1.5f, dummy.as<float>(), dummy.as<float>(), 0.5f, dc.as<float>());
    stream.synchronize();
    gemm(s, 1.5f, nullptr, nullptr, 0.5f, c.data());
    EXPECT_EQ(download(dc, c.size()), c) << s.m << "x" << s.n << "x" << s.k;
  }
#endif
}

TEST(CudaCore, FlatKernelsAndEvents) {
  SPARQ_SKIP_WITHOUT_GPU();
#ifdef SPARQ_HAS_CUDA
  cuda::Stream stream;
  cuda::Event start(true), stop(true);
  const std::size_t n = 1000003;
  Buffer x = Buffer::device(n * 4), y = Buffer::device(n * 4, true);
  start.record(stream.get());
  cuda::fill(x.as<float>(), n, 2.0f, stream.get());
  cuda::axpy(3.0f, x.as<float>(), y.as<float>(), n, stream.get());
  cuda::scale(y.as<float>(), n, 0.5f, stream.get());
  stop.record(stream.get());
  stop.synchronize();
  EXPECT_TRUE(stop.ready());
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0f);
  const auto got = download(y, n);
  for (std::size_t i = 0; i < n; i += 1013) ASSERT_EQ(got[i], 3.0f);
#endif
}

// Runs everywhere: without a device the CUDA context is refused with the count, never a crash.
TEST(ExecContext, CpuContextAndRefusedCudaOrdinal) {
  EXPECT_EQ(ExecContext::cpu().device(), Device::kCPU);
  EXPECT_EQ(ExecContext::cpu().describe(), "cpu");
  const int visible = ExecContext::cuda_device_count();
  auto ctx = ExecContext::create_cuda(visible);  // one past the last visible device
  ASSERT_FALSE(ctx.is_ok());
#ifdef SPARQ_HAS_CUDA
  const std::string cause = std::to_string(visible) + " visible";
#else
  const std::string cause = "built without nvcc";
#endif
  EXPECT_NE(ctx.status().message().find(cause), std::string::npos) << ctx.status().message();
}

TEST(ExecContext, CudaContextRunsItsStreamAndBindsTheStore) {
  SPARQ_SKIP_WITHOUT_GPU();
#ifdef SPARQ_HAS_CUDA
  auto ctx = ExecContext::create_cuda(0);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().message();
  EXPECT_EQ((*ctx)->device(), Device::kCUDA);
  EXPECT_NE((*ctx)->describe().find("cuda:0"), std::string::npos);
  ParamStore store;
  store.add({"w", {7, 3}, Init::normal(1.0f), true});
  store.allocate(**ctx);
  EXPECT_EQ(store.device(), Device::kCUDA);
  EXPECT_EQ(&store.context(), ctx->get());
  store.initialize(5);
  // Initialised on the host and copied: identical to a CPU store with the same seed.
  ParamStore host;
  host.add({"w", {7, 3}, Init::normal(1.0f), true});
  host.allocate();
  host.initialize(5);
  const cudaStream_t stream = (*ctx)->cuda().stream.get();
  cuda::scale(store.params(), static_cast<std::size_t>(store.flat_numel()), 2.0f, stream);
  (*ctx)->synchronize();
  std::vector<float> got(static_cast<std::size_t>(store.flat_numel()));
  CUDA_CHECK(cudaMemcpy(got.data(), store.params(), got.size() * 4, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 2.0f * host.params()[i]) << i;
#endif
}

// The guard bands of the kernel tests catch a write one element past the end.
TEST(CudaCore, GuardBandsCatchAnOutOfBoundsWrite) {
  SPARQ_SKIP_WITHOUT_GPU();
#ifdef SPARQ_HAS_CUDA
  testing::GuardedDeviceArray<float> a(std::vector<float>(1001, 1.0f));
  cuda::fill(a.data(), a.size(), 3.0f, nullptr);
  EXPECT_TRUE(a.guards_intact());
  EXPECT_EQ(a.download(), std::vector<float>(1001, 3.0f));
  cuda::fill(a.data(), a.size() + 1, 3.0f, nullptr);
  EXPECT_FALSE(a.guards_intact());
  EXPECT_EQ(testing::normalized_error({1.0f, 2.0f}, {1.0f, 2.0f}), 0.0);
#endif
}

}  // namespace
}  // namespace sparq
