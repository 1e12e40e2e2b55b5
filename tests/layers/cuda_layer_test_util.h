// Helpers for the CUDA layer tests: a layer bound on the GPU next to its CPU twin, both from
// stores with identical layouts and contents, and host copies of device results. Random
// parameters AND random old gradients go into both stores, so comparing gradients after a
// backward also checks that parameter gradients accumulate (+=, Note [Gradient rule]).
// Header-only, compiled by g++ against the CUDA runtime API.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "layer_test_util.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_check.h"

namespace sparq::testing {

// A pageable cudaMemcpy to the device may return before its DMA has landed, and it runs on
// the legacy stream, which the context's non-blocking stream does not wait for: call this
// after uploading and before the layer under test enqueues its kernels.
inline void uploads_done() { CUDA_CHECK(cudaDeviceSynchronize()); }

// FP32 cuBLAS against the CPU's Eigen GEMM differ only in summation order; with K <= 103 the
// relative error is ~1e-7, so 1e-5 leaves a wide margin and still catches a wrong operand.
inline constexpr double kGemmBound = 1e-5;

// Declares `layers` into a fresh store in `context`, allocates, initialises (seed 1: the
// initialisers are seeded per name, so a device store's weights equal a CPU store's), binds,
// and waits for the store's fills (uploads_done).
template <typename... Layers>
ParamStore bind_in(const ExecContext& context, Layers&... layers) {
  ParamStore store;
  (layers.declare(store), ...);
  store.allocate(context);
  store.initialize(1);
  (layers.bind(store), ...);
  uploads_done();
  return store;
}

// Outputs start as NaN, so an element a kernel forgets to write shows (Note [Gradient rule]).
inline std::vector<float> nans(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         double bound, const std::string& what) {
  EXPECT_LE(normalized_error(got, want), bound) << what;
}

// Every device output: the guards intact and the values within the bound.
inline void expect_device(const GuardedDeviceArray<float>& got, const std::vector<float>& want,
                          double bound, const std::string& what) {
  EXPECT_TRUE(got.guards_intact()) << what << ": a kernel wrote outside its output";
  expect_close(got.download(), want, bound, what);
}

// A test with a CUDA execution context, skipped when no device is visible.
class CudaLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SPARQ_SKIP_WITHOUT_GPU();
    ctx_ = test_cuda_context();
    ASSERT_NE(ctx_, nullptr);
  }
  std::unique_ptr<ExecContext> ctx_;
};

// Same random parameters, N(0, param_std^2), and gradients, N(0, 1), in the CPU store and
// the GPU store (same layout).
inline void randomize_both(ParamStore& cpu_store, ParamStore& gpu_store, std::uint64_t seed,
                           float param_std = 1.0f) {
  ASSERT_EQ(cpu_store.flat_numel(), gpu_store.flat_numel());
  for (const ParamEntry& e : cpu_store.entries()) {
    fill_normal(cpu_store.params() + e.offset, static_cast<std::size_t>(e.numel), 0.0f, param_std,
                seed, 1);
    fill_normal(cpu_store.grads() + e.offset, static_cast<std::size_t>(e.numel), 0.0f, 1.0f, seed,
                2);
    ++seed;
  }
  const std::size_t bytes = static_cast<std::size_t>(cpu_store.flat_numel()) * sizeof(float);
  CUDA_CHECK(cudaMemcpy(gpu_store.params(), cpu_store.params(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(gpu_store.grads(), cpu_store.grads(), bytes, cudaMemcpyHostToDevice));
  uploads_done();
}

// Normalized error of the GPU store's whole flat gradient against the CPU store's.
inline double grad_error(const ParamStore& gpu_store, const ParamStore& cpu_store) {
  const auto n = static_cast<std::size_t>(cpu_store.flat_numel());
  return normalized_error(download(gpu_store.grads(), n),
                          std::vector<float>(cpu_store.grads(), cpu_store.grads() + n));
}

inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  return to_float(random_vec(n, seed, scale));
}

}  // namespace sparq::testing
#endif
