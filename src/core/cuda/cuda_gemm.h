// Device GEMM with exactly the row-major semantics of core/gemm.h, through cuBLAS.
// All pointers are device pointers; the call is asynchronous on the handle's stream.
#pragma once

#include "core/cuda/cuda_handles.h"
#include "core/gemm.h"

namespace sparq::cuda {

void gemm(const CublasHandle& handle, const GemmShape& shape, float alpha, const float* a,
          const float* b, float beta, float* c);

void gemm_strided_batched(const CublasHandle& handle, const GemmShape& shape, float alpha,
                          const float* a, long long stride_a, const float* b, long long stride_b,
                          float beta, float* c, long long stride_c, int batch);

}  // namespace sparq::cuda
