// Device GEMM with exactly the row-major semantics of core/gemm.h, through cuBLAS.
// All pointers are device pointers; the call is asynchronous on the handle's stream.
#pragma once

#include <cstdint>

#include "core/cuda/cuda_handles.h"
#include "core/gemm.h"

namespace sparq::cuda {

void gemm(const CublasHandle& handle, const GemmShape& shape, float alpha, const float* a,
          const float* b, float beta, float* c);

void gemm_strided_batched(const CublasHandle& handle, const GemmShape& shape, float alpha,
                          const float* a, long long stride_a, const float* b, long long stride_b,
                          float beta, float* c, long long stride_c, int batch);

// The same products on bf16 operands (raw bf16 bits, as core/half_math.h writes them), with
// the products accumulated in f32 (CUBLAS_COMPUTE_32F) and C in f32: Note [bf16 GEMM
// operands] (core/cuda/mixed_gemm.h). beta = 1 accumulates into the f32 C as gemm does.
void gemm_bf16(const CublasHandle& handle, const GemmShape& shape, float alpha,
               const std::uint16_t* a, const std::uint16_t* b, float beta, float* c);

void gemm_strided_batched_bf16(const CublasHandle& handle, const GemmShape& shape, float alpha,
                               const std::uint16_t* a, long long stride_a,
                               const std::uint16_t* b, long long stride_b, float beta, float* c,
                               long long stride_c, int batch);

}  // namespace sparq::cuda
