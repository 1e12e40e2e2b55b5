#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "optim/cuda/optimizer_cuda.h"
#include "optim/update_math.h"

namespace sparq::optim::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops cover the rest; elements are independent, so the grid does not matter.
int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);
}

__device__ std::int64_t first_index() {
  return std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
}
__device__ std::int64_t grid_stride() { return std::int64_t{gridDim.x} * blockDim.x; }

__device__ float decay_of(const std::uint8_t* decay, std::int64_t i, float weight_decay) {
  return decay[i / kDecayChunkFloats] ? weight_decay : 0.0f;
}

// The clipped gradient. __fmul_rn is never fused into the update's next add, so the product is
// rounded to f32 exactly as the CPU rounds it when clip_grad_norm stores it in place.
__device__ float clipped(const float* grads, std::int64_t i, float scale) {
  return __fmul_rn(grads[i], scale);
}

__device__ float read_scale(const float* grad_scale) { return grad_scale ? *grad_scale : 1.0f; }

// A guarded step (optimizer_cuda.h) does nothing when the aggregate's norm is not finite.
__device__ bool skipped(const double* guard_norm) {
  return guard_norm != nullptr && !isfinite(*guard_norm);
}

__global__ void sgd_kernel(float* __restrict__ params, const float* __restrict__ grads,
                           float* __restrict__ momentum, const std::uint8_t* __restrict__ decay,
                           std::int64_t n, SgdScalars s, float weight_decay,
                           const float* __restrict__ grad_scale,
                           const double* __restrict__ guard_norm) {
  if (skipped(guard_norm)) return;
  const float scale = read_scale(grad_scale);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = clipped(grads, i, scale);
    const float wd = decay_of(decay, i, weight_decay);
    if (momentum) {
      sgd_momentum_update(g, wd, s, params[i], momentum[i]);
    } else {
      sgd_plain_update(g, wd, s, params[i]);
    }
  }
}

__global__ void adam_kernel(float* __restrict__ params, const float* __restrict__ grads,
                            float* __restrict__ m, float* __restrict__ v,
                            const std::uint8_t* __restrict__ decay, std::int64_t n,
                            AdamScalars s, bool frozen, float weight_decay,
                            const float* __restrict__ grad_scale,
                            const double* __restrict__ guard_norm) {
  if (skipped(guard_norm)) return;
  const float scale = read_scale(grad_scale);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = clipped(grads, i, scale);
    const float wd = decay_of(decay, i, weight_decay);
    if (frozen) {
      adam_frozen_update(g, wd, s, params[i], v[i]);
    } else {
      adam_update(g, wd, s, params[i], m[i], v[i]);
    }
  }
}

__global__ void momentum_to_send_kernel(float* __restrict__ grads, const float* __restrict__ params,
                                        float* __restrict__ m,
                                        const std::uint8_t* __restrict__ decay, std::int64_t begin,
                                        std::int64_t end, float weight_decay_l2, float beta1,
                                        float one_minus_beta1) {
  for (std::int64_t i = begin + first_index(); i < end; i += grid_stride()) {
    const float wd = decay_of(decay, i, weight_decay_l2);
    grads[i] = adam_local_momentum(grads[i], params[i], wd, beta1, one_minus_beta1, m[i]);
  }
}

__global__ void adam_direction_kernel(float* __restrict__ grads, const float* __restrict__ params,
                                      float* __restrict__ m, float* __restrict__ v,
                                      const std::uint8_t* __restrict__ decay, std::int64_t begin,
                                      std::int64_t end, float weight_decay_l2, AdamScalars s) {
  for (std::int64_t i = begin + first_index(); i < end; i += grid_stride()) {
    const float wd = decay_of(decay, i, weight_decay_l2);
    grads[i] = adam_local_direction(grads[i], params[i], wd, s, m[i], v[i]);
  }
}

__global__ void sgd_direction_kernel(float* __restrict__ grads, const float* __restrict__ params,
                                     float* __restrict__ momentum,
                                     const std::uint8_t* __restrict__ decay, std::int64_t begin,
                                     std::int64_t end, float weight_decay, SgdScalars s) {
  for (std::int64_t i = begin + first_index(); i < end; i += grid_stride()) {
    const float wd = decay_of(decay, i, weight_decay);
    float unused = 0.0f;  // no momentum buffer: sgd_local_direction does not touch it
    grads[i] = sgd_local_direction(grads[i], params[i], wd, s, momentum ? momentum[i] : unused);
  }
}

__global__ void apply_update_kernel(float* __restrict__ params, const float* __restrict__ grads,
                                    const std::uint8_t* __restrict__ decay, std::int64_t n,
                                    float decoupled_weight_decay, float lr,
                                    const float* __restrict__ grad_scale,
                                    const double* __restrict__ guard_norm) {
  if (skipped(guard_norm)) return;
  const float scale = read_scale(grad_scale);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float wd = decay_of(decay, i, decoupled_weight_decay);
    apply_averaged_update(clipped(grads, i, scale), wd, lr, params[i]);
  }
}

}  // namespace

void sgd_step(float* params, const float* grads, float* momentum, const std::uint8_t* decay,
              std::int64_t n, const SgdScalars& scalars, float weight_decay,
              const float* grad_scale, const double* guard_norm, cudaStream_t stream) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(params, grads, momentum, decay, n, scalars,
                                                      weight_decay, grad_scale, guard_norm);
  CUDA_CHECK(cudaGetLastError());
}

void adam_step(float* params, const float* grads, float* m, float* v, const std::uint8_t* decay,
               std::int64_t n, const AdamScalars& scalars, bool frozen, float weight_decay,
               const float* grad_scale, const double* guard_norm, cudaStream_t stream) {
  if (n <= 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(params, grads, m, v, decay, n, scalars,
                                                       frozen, weight_decay, grad_scale,
                                                       guard_norm);
  CUDA_CHECK(cudaGetLastError());
}

void adam_momentum_into_grads(float* grads, const float* params, float* m,
                              const std::uint8_t* decay, std::int64_t begin, std::int64_t end,
                              float weight_decay_l2, float beta1, float one_minus_beta1,
                              cudaStream_t stream) {
  if (end <= begin) return;
  momentum_to_send_kernel<<<blocks_for(end - begin), kThreads, 0, stream>>>(
      grads, params, m, decay, begin, end, weight_decay_l2, beta1, one_minus_beta1);
  CUDA_CHECK(cudaGetLastError());
}

void adam_direction_into_grads(float* grads, const float* params, float* m, float* v,
                               const std::uint8_t* decay, std::int64_t begin, std::int64_t end,
                               float weight_decay_l2, const AdamScalars& scalars,
                               cudaStream_t stream) {
  if (end <= begin) return;
  adam_direction_kernel<<<blocks_for(end - begin), kThreads, 0, stream>>>(
      grads, params, m, v, decay, begin, end, weight_decay_l2, scalars);
  CUDA_CHECK(cudaGetLastError());
}

void sgd_direction_into_grads(float* grads, const float* params, float* momentum,
                              const std::uint8_t* decay, std::int64_t begin, std::int64_t end,
                              float weight_decay, const SgdScalars& scalars, cudaStream_t stream) {
  if (end <= begin) return;
  sgd_direction_kernel<<<blocks_for(end - begin), kThreads, 0, stream>>>(
      grads, params, momentum, decay, begin, end, weight_decay, scalars);
  CUDA_CHECK(cudaGetLastError());
}

void apply_update_step(float* params, const float* grads, const std::uint8_t* decay, std::int64_t n,
                       float decoupled_weight_decay, float lr, const float* grad_scale,
                       const double* guard_norm, cudaStream_t stream) {
  if (n <= 0) return;
  apply_update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      params, grads, decay, n, decoupled_weight_decay, lr, grad_scale, guard_norm);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparq::optim::cuda
