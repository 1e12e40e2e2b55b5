// The CUDA fp16/bf16 casts against DenseCastCompressor: the same message bits (denormals,
// overflow to Inf, NaN included) and the same decodes, for several world sizes. Label gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "compress/dense_cast.h"
#include "core/rng.h"

#if SPARQ_HAS_CUDA
#include "compress/cuda/dense_cast_cuda.h"
#endif

namespace sparq::compress {
namespace {

using sparq::testing::GuardedDeviceArray;

TEST(CudaDenseCast, EncodesAndDecodesLikeTheCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  const std::size_t n = 10007;
  std::vector<float> a(n);
  fill_normal(a.data(), n, 0.0f, 1.0f, 4, 1);
  a[0] = 1e-7f;  // an f16 denormal
  a[1] = 1e6f;   // f16 overflow
  a[2] = std::numeric_limits<float>::quiet_NaN();
  a[3] = -0.0f;
  for (auto [format, cast] : {std::pair{DenseCastCompressor::Format::kF16, cuda::Cast16::kF16},
                              std::pair{DenseCastCompressor::Format::kBF16, cuda::Cast16::kBF16}}) {
    for (int world : {1, 3, 4}) {
      SCOPED_TRACE(std::string(format == DenseCastCompressor::Format::kF16 ? "fp16" : "bf16") +
                   " P=" + std::to_string(world));
      DenseCastCompressor cpu(format);
      EncodeContext ctx;
      ctx.world_size = world;
      Message msg;
      cpu.encode(a, ctx, msg);
      std::vector<std::uint16_t> want(n);
      std::memcpy(want.data(), msg.data(), msg.size());

      GuardedDeviceArray<float> da(a);
      GuardedDeviceArray<std::uint16_t> dmsg(n);
      cuda::cast16_encode(cast, da.data(), n, world, dmsg.data(), nullptr);
      ASSERT_EQ(dmsg.download(), want);
      ASSERT_TRUE(dmsg.guards_intact());

      std::vector<float> set(n, 0.0f);
      cpu.decode(msg, set, 0.5f, DecodeMode::kSet, ctx);
      GuardedDeviceArray<float> dout(std::vector<float>(n, 0.0f));
      cuda::cast16_decode(cast, dmsg.data(), n, world, 0.5f, false, dout.data(), nullptr);
      const std::vector<float> got = dout.download();
      ASSERT_TRUE(dout.guards_intact());
      for (std::size_t i = 0; i < n; ++i) {
        if (std::isnan(set[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << i;
        } else {
          ASSERT_EQ(got[i], set[i]) << i;
        }
      }
    }
  }
#endif
}

}  // namespace
}  // namespace sparq::compress
