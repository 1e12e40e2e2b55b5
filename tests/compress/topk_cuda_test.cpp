// Exact top-k on the device against compress::TopkSelector::exact: the same indices in the
// same order and the same values, including heavy ties at the boundary (which go to the
// lowest indices), k = 1 and k = n, and odd sizes on both sides of the CPU's small-input
// path. Outputs sit between sentinel guards. Label gpu.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "compress/topk_select.h"
#include "core/rng.h"

#if SPARQ_HAS_CUDA
#include "compress/cuda/topk_cuda.h"
#endif

namespace sparq::compress {
namespace {

using sparq::testing::GuardedDeviceArray;

TEST(CudaTopk, SelectsTheCpuIndicesAndValues) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  for (std::size_t n : {1, 7, 100, 1000, 40000, 300001}) {
    for (bool ties : {false, true}) {
      std::vector<float> a(n);
      fill_normal(a.data(), n, 0.0f, 1.0f, n, ties ? 2 : 1);
      // With ties: magnitudes from 8 levels, so thousands of entries share the boundary.
      if (ties) {
        for (float& x : a) x = static_cast<float>(static_cast<int>(x * 2.0f)) * 0.5f;
      }
      for (std::size_t k : {std::size_t{1}, n / 100, n / 3, n}) {
        if (k == 0) continue;
        SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) +
                     (ties ? " with ties" : ""));
        TopkSelector selector;
        std::vector<std::uint32_t> want_idx;
        std::vector<float> want_val;
        selector.exact(a, k, want_idx, &want_val);

        GuardedDeviceArray<float> da(a);
        GuardedDeviceArray<std::uint32_t> idx(k);
        GuardedDeviceArray<float> val(k);
        GuardedDeviceArray<std::uint8_t> scratch(cuda::topk_scratch_bytes(n));
        cuda::topk_exact(da.data(), n, k, idx.data(), val.data(), scratch.data(), scratch.size(),
                         nullptr);
        ASSERT_EQ(idx.download(), want_idx);
        ASSERT_EQ(val.download(), want_val);
        ASSERT_TRUE(idx.guards_intact() && val.guards_intact() && scratch.guards_intact());
      }
    }
  }
#endif
}

}  // namespace
}  // namespace sparq::compress
