// powersgd's steps on a CUDA device (device_low_rank.h), each the CPU's function of
// compress/powersgd.h bit for bit: every output is computed by one thread with the shared
// element functions of powersgd_math.h (Note [PowerSGD's fixed summation order]), and the
// orthonormalisation runs in one block whose threads share the fixed row chunks.
// Matrices are row-major; every pointer is device memory; work is enqueued on `stream`.
// fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace sparq::cuda {

// out[rows, r] = M[rows, cols] F[cols, r]   (compress::times_factor)
void psgd_times_factor(const float* m, std::size_t rows, std::size_t cols, const float* f,
                       std::size_t r, float* out, cudaStream_t stream);
// out[cols, r] = M^T F[rows, r]               (compress::times_t_factor)
void psgd_times_t_factor(const float* m, std::size_t rows, std::size_t cols, const float* f,
                         std::size_t r, float* out, cudaStream_t stream);
// y[rows, cols] = P Q^T (compress::outer_factors) and, when e is not null, e -= y: the
// residual the CPU's finish_exchange leaves (a - M_hat).
void psgd_decode(const float* p, const float* q, std::size_t rows, std::size_t cols, std::size_t r,
                 float* y, float* e, cudaStream_t stream);
// compress::orthonormalize_columns in place. `partial`: psgd_partial_doubles(rows) doubles.
std::size_t psgd_partial_doubles(std::size_t rows);
void psgd_orthonormalize(float* m, std::size_t rows, std::size_t r, double* partial,
                         cudaStream_t stream);
// dst[i] = src[i] * scale (src may be dst): the summed factor or dense floats over the world.
void psgd_scale(const float* src, float* dst, std::size_t n, float scale, cudaStream_t stream);
// When every v[i] == 0 (a zero step's factor), v = backup: the warm start is kept.
void psgd_restore_if_zero(float* v, const float* backup, std::size_t n, cudaStream_t stream);

}  // namespace sparq::cuda
