// powersgd's thin products and its orthonormalisation (powersgd.h), in the order of Note
// [PowerSGD's fixed summation order] (powersgd_math.h), which the GPU strategy shares; the
// loops here are arranged for the CPU's caches, each output still one fma chain in ascending
// order.
#include <algorithm>
#include <cmath>

#include "compress/powersgd.h"
#include "compress/powersgd_math.h"

namespace sparq::compress {
namespace {

// The thin products (powersgd.h) go parallel over their outputs above this many multiply-adds.
constexpr std::size_t kParallelWork = std::size_t{1} << 16;

}  // namespace

// out[rows, r] = M[rows, cols] * F[cols, r]
void times_factor(const float* m, const MatrixSegment& s, const float* f, std::size_t r,
                  float* out) {
#pragma omp parallel for schedule(static) if (s.rows * s.cols * r > kParallelWork)
  for (std::size_t i = 0; i < s.rows; ++i) {
    float* o = out + i * r;
    std::fill(o, o + r, 0.0f);
    for (std::size_t k = 0; k < s.cols; ++k) {
      const float x = m[i * s.cols + k];
      for (std::size_t j = 0; j < r; ++j) o[j] = std::fma(x, f[k * r + j], o[j]);
    }
  }
}

// out[cols, r] = M^T * F[rows, r], parallel over blocks of columns of M.
void times_t_factor(const float* m, const MatrixSegment& s, const float* f, std::size_t r,
                    float* out) {
  constexpr std::size_t kBlock = 64;
  const std::size_t blocks = (s.cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (s.rows * s.cols * r > kParallelWork)
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t k0 = b * kBlock, k1 = std::min(s.cols, k0 + kBlock);
    std::fill(out + k0 * r, out + k1 * r, 0.0f);
    for (std::size_t i = 0; i < s.rows; ++i) {
      const float* fi = f + i * r;
      for (std::size_t k = k0; k < k1; ++k) {
        const float x = m[i * s.cols + k];
        for (std::size_t j = 0; j < r; ++j) out[k * r + j] = std::fma(x, fi[j], out[k * r + j]);
      }
    }
  }
}

// out[rows, cols] = P[rows, r] * Q[cols, r]^T
void outer_factors(const float* p, const float* q, const MatrixSegment& s, std::size_t r,
                   float* out) {
#pragma omp parallel for schedule(static) if (s.rows * s.cols * r > kParallelWork)
  for (std::size_t i = 0; i < s.rows; ++i) {
    for (std::size_t k = 0; k < s.cols; ++k) {
      out[i * s.cols + k] = psgd_outer(p + i * r, q + k * r, r);
    }
  }
}

// Modified Gram-Schmidt, each column projected twice (Note [Gram-Schmidt twice]); the dot
// products are chunked double sums (powersgd_math.h).
void orthonormalize_columns(float* m, std::size_t rows, std::size_t r) {
  const std::size_t chunks = psgd_chunks(rows);
  const auto dot = [&](std::size_t a, std::size_t b) {
    double total = 0.0;
    for (std::size_t c = 0; c < chunks; ++c) total += psgd_chunk_dot(m, rows, r, a, b, c);
    return total;
  };
  for (std::size_t j = 0; j < r; ++j) {
    for (std::size_t step = 0; step < psgd_projections(j); ++step) {
      const std::size_t prev = step % j;
      const double d = dot(j, prev);
      for (std::size_t i = 0; i < rows; ++i) {
        m[i * r + j] = psgd_subtract(m[i * r + j], d, m[i * r + prev]);
      }
    }
    const float inv = psgd_inverse_norm(dot(j, j));
    for (std::size_t i = 0; i < rows; ++i) m[i * r + j] *= inv;
  }
}

}  // namespace sparq::compress
