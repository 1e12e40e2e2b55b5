// Helpers of the CUDA optimizer tests (cuda_optimizer_test.cpp, cuda_optimizer_kernels_test.cpp):
// whole-buffer copies that wait for the device, and the distance in ulps that the tests print
// next to each bound so that a GPU run shows how far from bit-exact the device really is.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/device_test_util.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#endif

namespace sparq::testing {

// The largest distance in representable floats between got[i] and want[i].
inline std::int64_t max_ulps(const std::vector<float>& got, const std::vector<float>& want) {
  auto ordered = [](float f) {
    const auto bits = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(f));
    return bits < 0 ? -(bits & 0x7fffffff) : bits;
  };
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const std::int64_t d = ordered(got[i]) - ordered(want[i]);
    worst = std::max(worst, d < 0 ? -d : d);
  }
  return worst;
}

// Checks got against want by normalized error below `bound` and prints the ulp distance.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         double bound, const std::string& what) {
  const double err = normalized_error(got, want);
  EXPECT_LE(err, bound) << what;
  std::printf("  %-40s normalized error %.3g, max %lld ulp\n", what.c_str(), err,
              static_cast<long long>(max_ulps(got, want)));
}

#if SPARQ_HAS_CUDA
template <typename T>
std::vector<T> download_all(const T* device, std::int64_t n) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> host(static_cast<std::size_t>(n));
  if (n > 0) {
    CUDA_CHECK(cudaMemcpy(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
  return host;
}

template <typename T>
void upload_all(T* device, const std::vector<T>& host) {
  CUDA_CHECK(cudaDeviceSynchronize());  // nothing queued may still read the old contents
  if (!host.empty()) {
    CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaDeviceSynchronize());  // ordered before kernels on a non-blocking stream
}
#endif

}  // namespace sparq::testing
