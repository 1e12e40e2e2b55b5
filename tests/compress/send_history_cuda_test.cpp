// The device send history (log.never_sent_window on a GPU store) against the CPU's
// SendHistory: the same stamps after several steps of decoded messages with zeros, negative
// zeros and non-zero values, and the same unsent counts for windows shorter and longer than
// the steps run, on odd sizes. Outputs sit between sentinel guards. Label gpu.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "compress/send_history.h"
#include "compress/send_window.h"
#include "core/rng.h"

#if SPARQ_HAS_CUDA
#include "compress/cuda/send_history_cuda.h"
#endif

namespace sparq::compress {
namespace {

using sparq::testing::GuardedDeviceArray;

TEST(CudaSendHistory, StampsAndCountsLikeTheCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  for (std::size_t n : {1, 255, 1000, 70001, 1 << 20}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<std::uint32_t> host_stamps(n, 0);
    SendHistory cpu(host_stamps);
    GuardedDeviceArray<std::uint32_t> stamps(std::vector<std::uint32_t>(n, 0));
    GuardedDeviceArray<unsigned long long> count(1);
    for (std::uint32_t step = 1; step <= 6; ++step) {
      // A sparse message: about 1 in (step + 1) coordinates sent, the others 0 or -0.
      std::vector<float> decoded(n);
      fill_normal(decoded.data(), n, 0.0f, 1.0f, 17, step);
      for (std::size_t i = 0; i < n; ++i) {
        if ((i * 7 + step) % (step + 1) != 0) decoded[i] = (i % 2) ? 0.0f : -0.0f;
      }
      cpu.begin_step(step);
      cpu.mark_nonzero(0, decoded);
      GuardedDeviceArray<float> d(decoded);
      cuda::stamp_sent(stamps.data(), d.data(), n, step, nullptr);
      ASSERT_EQ(stamps.download(), host_stamps) << "step " << step;
      for (std::uint32_t window : {1u, 3u, 6u, 9u}) {
        cuda::count_unsent(stamps.data(), n, window_cutoff(step, window), count.data(), nullptr);
        EXPECT_EQ(count.download()[0], cpu.count_unsent(window))
            << "step " << step << " window " << window;
      }
      EXPECT_TRUE(stamps.guards_intact());
      EXPECT_TRUE(count.guards_intact());
      EXPECT_TRUE(d.guards_intact());
    }
  }
#endif
}

}  // namespace
}  // namespace sparq::compress
