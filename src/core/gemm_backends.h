// Internal to core/gemm*.cpp: the kernels behind gemm() (Note [GEMM backends] in gemm.h).
// Every function takes a resolved shape: validated, leading dimensions filled in, and
// m, n, k all > 0 (gemm() handles the empty cases itself).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/gemm.h"

namespace sparq::gemm_detail {

// Computes C in chunks of `chunk` columns (split_n) or rows, spread over the OpenMP threads
// when called outside a parallel region: kernel(part_shape, a_part, b_part, c_part) runs
// each chunk single-threaded on the matching slices of op(A), op(B) and C.
template <typename Kernel>
void for_each_chunk(const GemmShape& s, const float* a, const float* b, float* c, bool split_n,
                    std::int64_t chunk, int outer_team_size, Kernel kernel) {
  const std::int64_t dim = split_n ? s.n : s.m;
  const std::int64_t chunks = (dim + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1 && outer_team_size == 1)
  for (std::int64_t i = 0; i < chunks; ++i) {
    const std::int64_t start = i * chunk, width = std::min(chunk, dim - start);
    GemmShape part = s;
    if (split_n) {
      part.n = width;
      kernel(part, a, s.trans_b ? b + start * s.ldb : b + start, c + start);
    } else {
      part.m = width;
      kernel(part, s.trans_a ? a + start : a + start * s.lda, b, c + start * s.ldc);
    }
  }
}

void eigen_gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
                float* c);

// sparq's own AVX-512 kernel (gemm_avx512.cpp); available when the build has AVX-512.
bool avx512_available();
void avx512_gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
                 float* c);

// OpenBLAS or BLIS through cblas_sgemm from a dlopen'ed library (gemm_cblas.cpp).
bool cblas_available(GemmBackend backend, std::string* why);
std::string cblas_library_path(GemmBackend backend);
// The CPU kernel a BLAS picked for this machine (OpenBLAS's openblas_get_corename(), e.g.
// "Haswell" or "SkylakeX"); "" when the library does not say or is not available.
std::string cblas_core_name(GemmBackend backend);
void cblas_gemm(GemmBackend backend, const GemmShape& s, float alpha, const float* a,
                const float* b, float beta, float* c);

}  // namespace sparq::gemm_detail
