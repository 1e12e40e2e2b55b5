#include "core/cuda/cuda_gemm.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/check.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {
namespace {

// cuBLAS is column-major. A row-major C[M,N] is a column-major C^T[N,M], and
// C^T = op(B)^T op(A)^T, so we call cuBLAS with the operands swapped and M/N exchanged; the
// transpose flags carry over unchanged.
struct ColMajorCall {
  cublasOperation_t op_first, op_second;
  int m, n, k, ld_first, ld_second, ldc;
};

// Leading dimensions are at least 1, as cuBLAS requires even of an empty matrix: a zero m, n
// or k then gives the row-major semantics of core/gemm.h (nothing for m or n == 0, C = beta C
// for k == 0) instead of CUBLAS_STATUS_INVALID_VALUE, which ended the job (static review,
// 2026-12-06; no caller passes one today).
ColMajorCall to_col_major(const GemmShape& s) {
  const long long lda = s.lda ? s.lda : std::max<long long>(1, s.trans_a ? s.m : s.k);
  const long long ldb = s.ldb ? s.ldb : std::max<long long>(1, s.trans_b ? s.k : s.n);
  const long long ldc = s.ldc ? s.ldc : std::max<long long>(1, s.n);
  // cuBLAS takes int dimensions: one beyond INT_MAX would wrap into another shape (static
  // review, 2026-12-06), so it is an error naming the product instead.
  for (const auto& [name, value] : {std::pair{"m", static_cast<long long>(s.m)},
                                    {"n", static_cast<long long>(s.n)},
                                    {"k", static_cast<long long>(s.k)},
                                    {"lda", lda},
                                    {"ldb", ldb},
                                    {"ldc", ldc}}) {
    SPARQ_CHECK(value <= std::numeric_limits<int>::max(),
                "cuBLAS GEMM [{} x {} x {}]: {} = {} exceeds the int cuBLAS takes", s.m, s.n, s.k,
                name, value);
  }
  return {s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
          s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
          static_cast<int>(s.n), static_cast<int>(s.m), static_cast<int>(s.k),
          static_cast<int>(ldb), static_cast<int>(lda), static_cast<int>(ldc)};
}

}  // namespace

void gemm(const CublasHandle& handle, const GemmShape& shape, float alpha, const float* a,
          const float* b, float beta, float* c) {
  const ColMajorCall k = to_col_major(shape);
  CUBLAS_CHECK(cublasSgemm(handle.get(), k.op_first, k.op_second, k.m, k.n, k.k, &alpha, b,
                           k.ld_first, a, k.ld_second, &beta, c, k.ldc));
}

void gemm_strided_batched(const CublasHandle& handle, const GemmShape& shape, float alpha,
                          const float* a, long long stride_a, const float* b, long long stride_b,
                          float beta, float* c, long long stride_c, int batch) {
  const ColMajorCall k = to_col_major(shape);
  CUBLAS_CHECK(cublasSgemmStridedBatched(handle.get(), k.op_first, k.op_second, k.m, k.n, k.k,
                                         &alpha, b, k.ld_first, stride_b, a, k.ld_second,
                                         stride_a, &beta, c, k.ldc, stride_c, batch));
}

void gemm_bf16(const CublasHandle& handle, const GemmShape& shape, float alpha,
               const std::uint16_t* a, const std::uint16_t* b, float beta, float* c) {
  const ColMajorCall k = to_col_major(shape);
  CUBLAS_CHECK(cublasGemmEx(handle.get(), k.op_first, k.op_second, k.m, k.n, k.k, &alpha, b,
                            CUDA_R_16BF, k.ld_first, a, CUDA_R_16BF, k.ld_second, &beta, c,
                            CUDA_R_32F, k.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_strided_batched_bf16(const CublasHandle& handle, const GemmShape& shape, float alpha,
                               const std::uint16_t* a, long long stride_a,
                               const std::uint16_t* b, long long stride_b, float beta, float* c,
                               long long stride_c, int batch) {
  const ColMajorCall k = to_col_major(shape);
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle.get(), k.op_first, k.op_second, k.m, k.n, k.k, &alpha, b, CUDA_R_16BF, k.ld_first,
      stride_b, a, CUDA_R_16BF, k.ld_second, stride_a, &beta, c, CUDA_R_32F, k.ldc, stride_c,
      batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace sparq::cuda
