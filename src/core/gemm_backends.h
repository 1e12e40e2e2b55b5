// Internal to core/gemm*.cpp: the kernels behind gemm() (Note [GEMM backends] in gemm.h).
// Every function takes a resolved shape: validated, leading dimensions filled in, and
// m, n, k all > 0 (gemm() handles the empty cases itself).
#pragma once

#include <string>

#include "core/gemm.h"

namespace sparq::gemm_detail {

void eigen_gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
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
