// powersgd's per-element math (powersgd.h), one definition for the CPU compressor and its GPU
// strategy (compress/cuda/powersgd_cuda.h, device_low_rank.h), so the factors, the decoded
// bucket and the residual are the same bits on both sides.
//
// Note [PowerSGD's fixed summation order]: every output of the exchange's products is ONE
// chain of fmas over its reduction index in ascending order, starting from 0:
//   M F       out[i, j] = sum_k   M[i, k] F[k, j]    (k = 0 .. cols)
//   M^T F     out[k, j] = sum_i   M[i, k] F[i, j]    (i = 0 .. rows)
//   P Q^T     out[i, k] = sum_j   P[i, j] Q[k, j]    (j = 0 .. r)
// and the Gram-Schmidt dot products of orthonormalize_columns are double sums over fixed
// chunks of kOrthChunkRows rows (each chunk a chain of double fmas, the chunks then added in
// order), so one GPU block can share the rows among its threads without changing a bit. The
// fmas are written out: left to themselves g++ (on FMA hosts) and nvcc may each contract
// `acc += x * y`, but not necessarily alike. A GEMM library sums in its own, shape-dependent
// order, which is why the GPU does not use cuBLAS here: its factors would differ from the
// CPU's in the last bits, and the CPU's multi-rank tests would no longer speak for the GPU.
#pragma once

#include <cmath>
#include <cstddef>

#include "core/host_device.h"

namespace sparq::compress {

inline constexpr std::size_t kOrthChunkRows = 64;

// (M F)[i, j]: `row` is M's row i (cols floats), f is [cols, r] row-major.
SPARQ_HOST_DEVICE inline float psgd_times_factor(const float* row, const float* f, std::size_t cols,
                                                 std::size_t r, std::size_t j) {
  float acc = 0.0f;
  for (std::size_t k = 0; k < cols; ++k) acc = fmaf(row[k], f[k * r + j], acc);
  return acc;
}

// (M^T F)[k, j]: m is [rows, cols] row-major, f is [rows, r].
SPARQ_HOST_DEVICE inline float psgd_times_t_factor(const float* m, const float* f, std::size_t rows,
                                                   std::size_t cols, std::size_t r, std::size_t k,
                                                   std::size_t j) {
  float acc = 0.0f;
  for (std::size_t i = 0; i < rows; ++i) acc = fmaf(m[i * cols + k], f[i * r + j], acc);
  return acc;
}

// (P Q^T)[i, k] from P's row i and Q's row k (r floats each).
SPARQ_HOST_DEVICE inline float psgd_outer(const float* p_row, const float* q_row, std::size_t r) {
  float acc = 0.0f;
  for (std::size_t j = 0; j < r; ++j) acc = fmaf(p_row[j], q_row[j], acc);
  return acc;
}

// Chunk c's part of sum_i m[i, a] m[i, b] over a [rows, r] row-major matrix.
SPARQ_HOST_DEVICE inline double psgd_chunk_dot(const float* m, std::size_t rows, std::size_t r,
                                               std::size_t a, std::size_t b, std::size_t chunk) {
  const std::size_t begin = chunk * kOrthChunkRows;
  const std::size_t end = begin + kOrthChunkRows < rows ? begin + kOrthChunkRows : rows;
  double acc = 0.0;
  for (std::size_t i = begin; i < end; ++i) {
    acc = fma(static_cast<double>(m[i * r + a]), static_cast<double>(m[i * r + b]), acc);
  }
  return acc;
}

SPARQ_HOST_DEVICE inline std::size_t psgd_chunks(std::size_t rows) {
  return (rows + kOrthChunkRows - 1) / kOrthChunkRows;
}

// Gram-Schmidt's update of one entry of column j: x - dot * (column prev's entry).
SPARQ_HOST_DEVICE inline float psgd_subtract(float x, double dot, float prev) {
  return fmaf(-static_cast<float>(dot), prev, x);
}

// Note [Gram-Schmidt twice]: a column is projected off the columns before it in two full
// passes, then normalised. One pass leaves rounding noise of about 1e-7 of the column's norm
// in the directions of the earlier columns; when the column was (nearly) dependent on them
// (a gradient whose rank is below powersgd.rank), that noise is all that remains, and
// normalising it gave a column overlapping the others by up to 0.5, so P P^T M was no
// projection (the reconstruction overshot M). The second pass removes what the first left
// ("twice is enough"): a dependent column becomes a harmless unit direction orthogonal to
// the rest. An exactly zero column stays zero. The CPU and CUDA loops both run
// psgd_projections(j) projections, prev = step % j, in this order.
SPARQ_HOST_DEVICE inline std::size_t psgd_projections(std::size_t j) { return 2 * j; }

// The scale that normalises a column of squared norm `sum_squares`; 0 for a column of norm
// at most 1e-30, in practice an exactly zero one (it is left as zeros).
SPARQ_HOST_DEVICE inline float psgd_inverse_norm(double sum_squares) {
  const double norm = sqrt(sum_squares);
  return norm > 1e-30 ? static_cast<float>(1.0 / norm) : 0.0f;
}

}  // namespace sparq::compress
