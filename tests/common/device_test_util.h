// Helpers for CUDA kernel tests, ggml-style: every device output lives between two guard
// bands of sentinel values, so an out-of-bounds write is caught, and device results are
// compared with their CPU twin by a normalized error ||got - want|| / ||want|| against a
// bound stated per op. Tests using them are labelled `gpu` and skip with a message when no
// device is visible (SPARQ_SKIP_WITHOUT_GPU), so they compile and pass on CPU-only machines.
//
// Header-only, compiled by g++ (never nvcc): it uses the CUDA runtime API only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/tensor.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#endif

#define SPARQ_SKIP_WITHOUT_GPU()                                                      \
  if (!::sparq::cuda_available()) GTEST_SKIP() << "no CUDA device (or built without " \
                                                  "CUDA): skipped"

namespace sparq::testing {

// The CUDA context of device 0 for a test (call after SPARQ_SKIP_WITHOUT_GPU).
inline std::unique_ptr<ExecContext> test_cuda_context() {
  auto ctx = ExecContext::create_cuda(0);
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().message();
  return ctx.is_ok() ? std::move(ctx).value() : nullptr;
}

// The relative L2 error of a device result against its CPU twin; 0 when both are zero.
inline double normalized_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

#if SPARQ_HAS_CUDA
// Device array contents after the device has finished all queued work.
template <typename T>
std::vector<T> download(const T* device, std::size_t n) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> host(n);
  if (n) CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}
// Host copy of an f32 device view (a ParamStore tensor, an arena slot).
inline std::vector<float> download(const Tensor& t) {
  return download(t.data<float>(), static_cast<std::size_t>(t.numel()));
}
// Writes host values into an f32 device view; complete on return (a pageable upload may
// return before its data lands, and a context's non-blocking stream would not wait for it).
inline void upload(const Tensor& t, const std::vector<float>& host) {
  ASSERT_EQ(static_cast<std::size_t>(t.numel()), host.size()) << t.str();
  if (!host.empty()) {
    CUDA_CHECK(cudaMemcpy(t.raw(), host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

// A device array of n elements of T between two guard bands of kGuard elements filled with
// a sentinel byte pattern. view() covers the n elements only; guards_intact() says whether a
// kernel wrote outside them.
template <typename T>
class GuardedDeviceArray {
 public:
  static constexpr std::size_t kGuard = 64;
  static constexpr unsigned char kSentinel = 0xA5;

  explicit GuardedDeviceArray(std::size_t n)
      : n_(n), buffer_(Buffer::device((n + 2 * kGuard) * sizeof(T))) {
    CUDA_CHECK(cudaMemset(buffer_.data(), kSentinel, buffer_.size()));
    // The memset runs on the legacy stream and may still be pending on return; work that a
    // test then enqueues on a non-blocking stream must not race it.
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  GuardedDeviceArray(const std::vector<T>& host) : GuardedDeviceArray(host.size()) {
    upload(host);
  }

  T* data() const { return buffer_.as<T>() + kGuard; }
  std::size_t size() const { return n_; }
  Tensor view(Shape shape) const {
    EXPECT_EQ(static_cast<std::size_t>(shape.numel()), n_);
    return Tensor(data(), DTypeOf<T>::value, shape, Device::kCUDA);
  }
  // Complete on return: a pageable cudaMemcpy may return before the data lands, and a
  // context's non-blocking stream would not wait for it, so the device is synchronized.
  void upload(const std::vector<T>& host) const {
    EXPECT_EQ(host.size(), n_);
    if (n_) CUDA_CHECK(cudaMemcpy(data(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  // Synchronizes the device first, so results of work queued on any stream are complete.
  std::vector<T> download() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(n_);
    if (n_) CUDA_CHECK(cudaMemcpy(host.data(), data(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  bool guards_intact() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> bytes(buffer_.size());
    CUDA_CHECK(cudaMemcpy(bytes.data(), buffer_.data(), bytes.size(), cudaMemcpyDeviceToHost));
    const std::size_t guard_bytes = kGuard * sizeof(T);
    for (std::size_t i = 0; i < guard_bytes; ++i) {
      if (bytes[i] != kSentinel || bytes[bytes.size() - 1 - i] != kSentinel) return false;
    }
    return true;
  }

 private:
  std::size_t n_;
  Buffer buffer_;
};
#else
// Declared without CUDA too, so a test's using-declaration compiles in CPU-only builds; any
// use would not (the tests that use it are guarded by SPARQ_HAS_CUDA).
template <typename T>
class GuardedDeviceArray;
#endif

}  // namespace sparq::testing
