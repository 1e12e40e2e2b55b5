// CPU matrix multiply on row-major f32 data (through Eigen, multithreaded with OpenMP):
//
//   C[M, N] = alpha * op(A) * op(B) + beta * C
//
// op(A) is [M, K]: A is stored [M, K] (lda >= K) or, with trans_a, [K, M] (lda >= M).
// op(B) is [K, N]: B is stored [K, N] (ldb >= N) or, with trans_b, [N, K] (ldb >= K).
// ldc >= N. When beta == 0, C is not read (it may hold garbage or NaN).
#pragma once

#include <cstdint>

namespace sparq {

struct GemmShape {
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  // 0 means dense (the natural leading dimension)
};

void gemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta,
          float* c);

// `batch` independent GEMMs; matrix i starts at a + i*stride_a (likewise b, c). Batches run
// in parallel, each GEMM single-threaded, which is what attention's many small products need.
void gemm_strided_batched(const GemmShape& shape, float alpha, const float* a,
                          std::int64_t stride_a, const float* b, std::int64_t stride_b,
                          float beta, float* c, std::int64_t stride_c, std::int64_t batch);

// Plain triple loop in double precision: the reference the tests compare against.
void gemm_reference(const GemmShape& shape, float alpha, const float* a, const float* b,
                    float beta, float* c);

}  // namespace sparq
