#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_ops.h"
#include "core/half_math.h"

namespace sparq::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);  // grid-stride loops cover the rest
}

__global__ void fill_kernel(float* x, std::size_t n, float value) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = value;
}

__global__ void scale_kernel(float* x, std::size_t n, float alpha) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] *= alpha;
}

__global__ void axpy_kernel(float alpha, const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] += alpha * x[i];
}

__global__ void cast_to_bf16_kernel(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    dst[i] = bf16_bits_of(src[i]);
}

}  // namespace

void fill(float* x, std::size_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, value);
  CUDA_CHECK(cudaGetLastError());
}

void scale(float* x, std::size_t n, float alpha, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, alpha);
  CUDA_CHECK(cudaGetLastError());
}

void axpy(float alpha, const float* x, float* y, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  axpy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(alpha, x, y, n);
  CUDA_CHECK(cudaGetLastError());
}

void cast_to_bf16(const float* src, std::uint16_t* dst, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  cast_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::cuda
