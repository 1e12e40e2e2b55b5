// The layers' device products, in the precision of their context.
//
// Note [bf16 GEMM operands]
// `train.precision: bf16` (GemmPrecision::kBF16 on a CUDA context) changes how the layers'
// GEMMs multiply and nothing else:
//   * both operands of every layer product (linear and embedding-projection GEMMs forward and
//     backward, attention's scores, context, and their gradients) are rounded to bf16,
//     round to nearest even, into staging memory (core/cuda/bf16_staging.h);
//   * cuBLAS multiplies them on the tensor cores and accumulates in f32
//     (CUBLAS_COMPUTE_32F); C is f32, so dW += dY^T X still accumulates in f32 (Note
//     [Gradient rule]);
//   * activations, softmax, layernorm, GELU, the loss, master parameters, gradients, the
//     optimizer, buckets and compression all stay f32.
// The products are those of f32 GEMMs on bf16-rounded operands (a bf16 x bf16 product is exact
// in f32), up to the summation order: what the gpu tests check against the host. This is
// the numerics PyTorch's autocast gives matmuls, except that the outputs stay f32 in memory:
// sparq keeps its activations f32, so bf16 buys tensor-core speed, not activation memory.
// Each product stages its operands anew (weights included, a pass over them per use); a bf16
// weight shadow refreshed once per step would save those passes.
// VGG's convolutions run on cuDNN in f32 and have no bf16 path: the config refuses bf16 there.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/device_resources.h"
#include "core/gemm.h"

namespace sparq::cuda {

// Elements of storage that op(A) [M, K] and op(B) [K, N] span from their first element.
std::int64_t operand_a_extent(const GemmShape& shape);
std::int64_t operand_b_extent(const GemmShape& shape);

// A bf16 copy of src[0, n) in staging slot `slot` (Bf16Staging's roles), on the stream.
const std::uint16_t* stage_bf16(const DeviceResources& device, int slot, const float* src,
                                std::size_t n);

// C = alpha op(A) op(B) + beta C, as cuda::gemm, in the context's precision: f32 is
// cuda::gemm itself; bf16 stages A and B (slots kOperandA and kOperandB) and calls gemm_bf16.
void layer_gemm(const DeviceResources& device, const GemmShape& shape, float alpha, const float* a,
                const float* b, float beta, float* c);

}  // namespace sparq::cuda
