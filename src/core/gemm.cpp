#include "core/gemm.h"

#include <Eigen/Core>

#include "core/check.h"

namespace sparq {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

GemmShape resolved(const GemmShape& s) {
  GemmShape r = s;
  if (r.lda == 0) r.lda = s.trans_a ? s.m : s.k;
  if (r.ldb == 0) r.ldb = s.trans_b ? s.k : s.n;
  if (r.ldc == 0) r.ldc = s.n;
  SPARQ_CHECK(s.m >= 0 && s.n >= 0 && s.k >= 0, "negative GEMM size {}x{}x{}", s.m, s.n, s.k);
  SPARQ_CHECK(r.lda >= (s.trans_a ? s.m : s.k) && r.ldb >= (s.trans_b ? s.k : s.n) && r.ldc >= s.n,
              "GEMM leading dimensions too small");
  return r;
}

void gemm_one(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
              float* c) {
  MutMap C(c, s.m, s.n, Eigen::OuterStride<>(s.ldc));
  if (s.m == 0 || s.n == 0) return;
  if (s.k == 0) {
    if (beta == 0.0f) C.setZero(); else C *= beta;
    return;
  }
  // Eigen evaluates op(A)*op(B) with its blocked, vectorised kernel for every combination.
  auto run = [&](const auto& A, const auto& B) {
    if (beta == 0.0f) {
      C.noalias() = alpha * (A * B);
    } else {
      if (beta != 1.0f) C *= beta;
      C.noalias() += alpha * (A * B);
    }
  };
  const ConstMap A(a, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, Eigen::OuterStride<>(s.lda));
  const ConstMap B(b, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, Eigen::OuterStride<>(s.ldb));
  if (!s.trans_a && !s.trans_b) run(A, B);
  else if (!s.trans_a && s.trans_b) run(A, B.transpose());
  else if (s.trans_a && !s.trans_b) run(A.transpose(), B);
  else run(A.transpose(), B.transpose());
}

}  // namespace

void gemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta,
          float* c) {
  gemm_one(resolved(shape), alpha, a, b, beta, c);
}

void gemm_strided_batched(const GemmShape& shape, float alpha, const float* a,
                          std::int64_t stride_a, const float* b, std::int64_t stride_b,
                          float beta, float* c, std::int64_t stride_c, std::int64_t batch) {
  const GemmShape s = resolved(shape);
  // Eigen runs single-threaded inside an active OpenMP region, so parallelism is per batch.
#pragma omp parallel for schedule(dynamic) if (batch > 1)
  for (std::int64_t i = 0; i < batch; ++i) {
    gemm_one(s, alpha, a + i * stride_a, b + i * stride_b, beta, c + i * stride_c);
  }
}

void gemm_reference(const GemmShape& shape, float alpha, const float* a, const float* b,
                    float beta, float* c) {
  const GemmShape s = resolved(shape);
  for (std::int64_t i = 0; i < s.m; ++i) {
    for (std::int64_t j = 0; j < s.n; ++j) {
      double acc = 0.0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        const double av = s.trans_a ? a[p * s.lda + i] : a[i * s.lda + p];
        const double bv = s.trans_b ? b[j * s.ldb + p] : b[p * s.ldb + j];
        acc += av * bv;
      }
      float& out = c[i * s.ldc + j];
      out = static_cast<float>(alpha * acc + (beta == 0.0f ? 0.0 : beta * static_cast<double>(out)));
    }
  }
}

}  // namespace sparq
