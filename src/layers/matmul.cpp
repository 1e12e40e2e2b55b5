#include "layers/matmul.h"

#include <Eigen/Core>

namespace sparq {

template <>
void matmul<float>(const GemmShape& shape, float alpha, const float* a, const float* b,
                   float beta, float* c) {
  gemm(shape, alpha, a, b, beta, c);
}

// The double path exists for the tests only; Eigen keeps it short and exact enough.
template <>
void matmul<double>(const GemmShape& s, double alpha, const double* a, const double* b,
                    double beta, double* c) {
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat, Eigen::Unaligned, Eigen::OuterStride<>>;
  const std::int64_t lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
  const std::int64_t ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
  const std::int64_t ldc = s.ldc ? s.ldc : s.n;
  Eigen::Map<Mat, Eigen::Unaligned, Eigen::OuterStride<>> C(c, s.m, s.n, Eigen::OuterStride<>(ldc));
  const CMap A(a, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, Eigen::OuterStride<>(lda));
  const CMap B(b, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, Eigen::OuterStride<>(ldb));
  Mat prod(s.m, s.n);
  if (!s.trans_a && !s.trans_b) prod = A * B;
  else if (!s.trans_a) prod = A * B.transpose();
  else if (!s.trans_b) prod = A.transpose() * B;
  else prod = A.transpose() * B.transpose();
  if (beta == 0.0) C = alpha * prod;
  else C = beta * C + alpha * prod;
}

}  // namespace sparq
