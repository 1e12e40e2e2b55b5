#include "layers/cuda/dense_launch.h"
#include "layers/cuda/dropout_cuda.h"

namespace sparq::cuda {
namespace {

// One thread per Philox block: block `first_block + t` holds positions 4 * block + lane,
// which are elements i = 4 * block + lane - first (skipped outside [0, n)). Each block is
// computed once and all four words used, as on the CPU.
__global__ void dropout_kernel(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                               float p, float keep_scale, const float* x, float* y,
                               std::int64_t n) {
  const std::uint64_t first_block = first / 4;
  const std::uint64_t blocks = (first + static_cast<std::uint64_t>(n) + 3) / 4 - first_block;
  for (std::int64_t t = dense::first_index(); static_cast<std::uint64_t>(t) < blocks;
       t += dense::grid_stride()) {
    const std::uint64_t block = first_block + static_cast<std::uint64_t>(t);
    const auto words = philox4x32(seed, stream, block);
    for (int lane = 0; lane < 4; ++lane) {
      const std::uint64_t pos = block * 4 + static_cast<std::uint64_t>(lane);
      if (pos < first || pos - first >= static_cast<std::uint64_t>(n)) continue;
      const std::uint64_t i = pos - first;
      y[i] = x[i] * dropout_scale<float>(words[lane], p, keep_scale);
    }
  }
}

}  // namespace

void dropout_apply(const DropoutKey& key, float p, const float* x, float* y, std::int64_t n,
                   cudaStream_t stream) {
  if (n == 0) return;
  const std::int64_t blocks = (static_cast<std::int64_t>(key.first % 4) + n + 3) / 4;
  // The scale is rounded once, on the host, by the same expression the CPU uses.
  dropout_kernel<<<dense::blocks_for(blocks), dense::kThreads, 0, stream>>>(
      key.seed, key.stream, key.first, p, dropout_keep_scale<float>(p), x, y, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
