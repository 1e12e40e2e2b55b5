// The Eigen backend: always built, the fallback when no BLAS library is present.
//
// Eigen's own OpenMP split is not used: it picks its K blocking from the number of threads,
// so a product's rounding changed with the thread count (and inside vs outside a parallel
// region). Instead the output is cut into chunks whose layout depends on the shape only,
// each computed by single-threaded Eigen, the chunks spread over the threads.
#include <Eigen/Core>

#include <algorithm>

#include "core/gemm_backends.h"
#include "core/threading.h"

namespace sparq::gemm_detail {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

// Chunk widths are multiples of Eigen's AVX-512 micro-panel (3 packets of 16 floats).
constexpr std::int64_t kChunkAlign = 48;
constexpr std::int64_t kMinChunk = 96;
// Enough chunks to balance 2..16 threads; each chunk repacks the other operand, so not more.
constexpr std::int64_t kTargetChunks = 16;
// Below this many multiply-adds one chunk: the product is too small to share.
constexpr double kMinSplitMacs = 2.0e6;

void single_threaded_gemm(const GemmShape& s, float alpha, const float* a, const float* b,
                          float beta, float* c) {
  MutMap C(c, s.m, s.n, Eigen::OuterStride<>(s.ldc));
  // Eigen evaluates op(A)*op(B) with its blocked, vectorised kernel for every combination;
  // always single-threaded here (see eigen_gemm).
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

void eigen_gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
                float* c) {
  // Eigen runs single-threaded when its thread count is 1 (set once; only gemm uses
  // Eigen's float products).
  static const bool single = [] { Eigen::setNbThreads(1); return true; }();
  (void)single;
  // Split the longer of M and N, so the repacked operand is the smaller one.
  const bool split_n = s.n >= s.m;
  const std::int64_t dim = split_n ? s.n : s.m;
  std::int64_t chunk = dim;
  if (static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) >= kMinSplitMacs) {
    chunk = std::max((dim + kTargetChunks - 1) / kTargetChunks, kMinChunk);
    chunk = (chunk + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  }
  for_each_chunk(s, a, b, c, split_n, chunk, team_size(),
                 [&](const GemmShape& part, const float* pa, const float* pb, float* pc) {
                   single_threaded_gemm(part, alpha, pa, pb, beta, pc);
                 });
}

}  // namespace sparq::gemm_detail
