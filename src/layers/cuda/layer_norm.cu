// CUDA LayerNorm. The row statistics use the CPU's arithmetic (double sums, two passes, the
// same float expressions for y and dx); the summation order differs (lane-strided and a warp
// butterfly), and nvcc contracts a * b + c into one fused multiply-add where the CPU may round
// twice (about 1 ulp; the tests bound the difference). Both orders are fixed, so results are
// deterministic.
#include "layers/cuda/layer_norm_cuda.h"

#include "core/cuda/cuda_check.h"
#include "layers/cuda/reduce.cuh"

namespace sparq::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr int kThreads = kRowsPerBlock * kWarpSize;

unsigned blocks_for_rows(std::int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

__global__ void layer_norm_forward_kernel(const float* x, const float* gamma, const float* beta,
                                          float* y, float* mean, float* rstd, std::int64_t rows,
                                          std::int64_t c, float eps) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together: the shuffles stay complete
  const int lane = threadIdx.x % kWarpSize;
  const float* xr = x + row * c;
  double sum = 0;
  for (std::int64_t j = lane; j < c; j += kWarpSize) sum += xr[j];
  const double mu = warp_reduce(sum, SumOp{}) / static_cast<double>(c);
  double sq = 0;
  for (std::int64_t j = lane; j < c; j += kWarpSize) sq += (xr[j] - mu) * (xr[j] - mu);
  sq = warp_reduce(sq, SumOp{});
  const float rs = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(c) + eps));
  const float m = static_cast<float>(mu);
  float* yr = y + row * c;
  for (std::int64_t j = lane; j < c; j += kWarpSize) yr[j] = (xr[j] - m) * rs * gamma[j] + beta[j];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma; one warp per row.
__global__ void layer_norm_dx_kernel(const float* x, const float* gamma, const float* mean,
                                     const float* rstd, const float* dy, float* dx,
                                     std::int64_t rows, std::int64_t c) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const int lane = threadIdx.x % kWarpSize;
  const float* xr = x + row * c;
  const float* dyr = dy + row * c;
  const float m = mean[row], rs = rstd[row];
  float sum_g = 0, sum_gx = 0;
  for (std::int64_t j = lane; j < c; j += kWarpSize) {
    const float g = dyr[j] * gamma[j];
    sum_g += g;
    sum_gx += g * (xr[j] - m) * rs;
  }
  const float inv_c = 1.0f / static_cast<float>(c);
  sum_g = warp_reduce(sum_g, SumOp{}) * inv_c;
  sum_gx = warp_reduce(sum_gx, SumOp{}) * inv_c;
  float* dxr = dx + row * c;
  for (std::int64_t j = lane; j < c; j += kWarpSize) {
    const float xhat = (xr[j] - m) * rs;
    dxr[j] = rs * (dyr[j] * gamma[j] - sum_g - xhat * sum_gx);
  }
}

// dgamma's term: dy * xhat, the CPU's expression.
struct GammaTerm {
  const float *x, *dy, *mean, *rstd;
  std::int64_t c;
  __device__ float operator()(std::int64_t r, std::int64_t j) const {
    return dy[r * c + j] * (x[r * c + j] - mean[r]) * rstd[r];
  }
};

}  // namespace

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, std::int64_t rows, std::int64_t c, float eps,
                        cudaStream_t stream) {
  if (rows <= 0) return;
  layer_norm_forward_kernel<<<blocks_for_rows(rows), kThreads, 0, stream>>>(
      x, gamma, beta, y, mean, rstd, rows, c, eps);
  CUDA_CHECK(cudaGetLastError());
}

std::size_t layer_norm_backward_scratch_floats(std::int64_t c) {
  return column_sums_scratch_floats(c);
}

void layer_norm_backward(const float* x, const float* gamma, const float* mean,
                         const float* rstd, const float* dy, float* dx, float* dgamma,
                         float* dbeta, float* scratch, std::int64_t rows, std::int64_t c,
                         cudaStream_t stream) {
  if (rows <= 0) return;
  layer_norm_dx_kernel<<<blocks_for_rows(rows), kThreads, 0, stream>>>(x, gamma, mean, rstd, dy,
                                                                       dx, rows, c);
  CUDA_CHECK(cudaGetLastError());
  // The two reductions share `scratch`: the stream runs them one after the other.
  column_sums_accumulate(GammaTerm{x, dy, mean, rstd, c}, rows, c, scratch, dgamma, stream);
  column_sums_accumulate(MatrixEntry{dy, c}, rows, c, scratch, dbeta, stream);
}

}  // namespace sparq::cuda
