// CPU matrix multiply on row-major f32 data:
//
//   C[M, N] = alpha * op(A) * op(B) + beta * C
//
// op(A) is [M, K]: A is stored [M, K] (lda >= K) or, with trans_a, [K, M] (lda >= M).
// op(B) is [K, N]: B is stored [K, N] (ldb >= N) or, with trans_b, [N, K] (ldb >= K).
// ldc >= N. When beta == 0, C is not read (it may hold garbage or NaN).
//
// Note [GEMM backends]
// ~~~~~~~~~~~~~~~~~~~~
// gemm() runs on one of four backends. Each gives the same bits for the same shape, inputs
// and thread count. Eigen's and avx512's bits also do not depend on the thread count
// (gemm_eigen.cpp, gemm_avx512.cpp);
// a BLAS's can differ between one thread and more, because the library's threaded driver
// blocks K differently from its one-thread driver (measured on OpenBLAS 0.3.21 for K
// between its Q and 2Q, e.g. K = 50257; docs/layers.md, "Determinism"):
//   eigen     Eigen's blocked kernel, multithreaded with OpenMP. Always available.
//   openblas  Debian's OpenBLAS (libopenblas0-openmp preferred), loaded at run time.
//   blis      Debian's BLIS (libblis4-openmp preferred), loaded at run time.
//   avx512    sparq's own blocked kernel (gemm_avx512.cpp), in builds with AVX-512.
// The BLAS libraries are opened with dlopen(RTLD_LOCAL) and called through cblas_sgemm, so
// one binary can hold both (they export the same symbols) and builds without either.
// The active backend is SPARQ_GEMM (environment: eigen | openblas | blis | avx512) if set, else the
// build default (CMake SPARQ_GEMM_DEFAULT). An unavailable SPARQ_GEMM backend is a fatal
// error; an unavailable build default falls back to the built-in backend (avx512 in an
// AVX-512 build, else Eigen) with one warning line. A build default of openblas also gives
// way to avx512, with one info line, where this build has AVX-512 and the kernel OpenBLAS
// picked for the CPU does not (Debian's 0.3.21 runs its AVX2 "Haswell" kernel on a recent
// AMD EPYC with AVX-512, where Eigen was 10-28% faster on every model and avx512 is 9-29%
// faster than Eigen; docs/layers.md, "GEMM backends").
// SPARQ_GEMM_LIB_PATH (colon-separated directories) is searched before the system paths.
// Threads: a BLAS gets sparq's OpenMP thread count (max_threads()) on every call made
// outside a parallel region; inside one, every backend runs single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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
// Always Eigen: the products are small, where a BLAS's call overhead dominates.
void gemm_strided_batched(const GemmShape& shape, float alpha, const float* a,
                          std::int64_t stride_a, const float* b, std::int64_t stride_b,
                          float beta, float* c, std::int64_t stride_c, std::int64_t batch);

// Plain triple loop in double precision: the reference the tests compare against.
void gemm_reference(const GemmShape& shape, float alpha, const float* a, const float* b,
                    float beta, float* c);

// ---- Backend selection (Note [GEMM backends]) ---------------------------------------------
enum class GemmBackend { kEigen, kOpenBlas, kBlis, kAvx512 };
inline constexpr GemmBackend kAllGemmBackends[] = {GemmBackend::kEigen, GemmBackend::kOpenBlas,
                                                   GemmBackend::kBlis, GemmBackend::kAvx512};

// "eigen", "openblas", "blis", "avx512"
std::string_view gemm_backend_name(GemmBackend backend);
// Parses a backend name; a fatal error naming `what` (e.g. "SPARQ_GEMM") when unknown.
GemmBackend parse_gemm_backend(std::string_view name, std::string_view what);

// Whether `backend` can run here (loads its library on first ask). When it cannot and
// `why` is given, *why says which library files were tried.
bool gemm_backend_available(GemmBackend backend, std::string* why = nullptr);
// The library file a BLAS backend was loaded from; "" for Eigen or when unavailable.
std::string gemm_backend_library(GemmBackend backend);

// Whether an OpenBLAS kernel (openblas_get_corename()) has AVX-512: SkylakeX, Cooperlake,
// SapphireRapids (any case). "" (unknown) counts as having it, so that nothing changes when
// the library does not say.
bool openblas_core_has_avx512(std::string_view core);

GemmBackend gemm_backend();            // the active backend
std::string_view gemm_backend_name();  // its name
// Switches the active backend for later calls; a fatal error when it is unavailable.
// Not safe while another thread is inside gemm().
void set_gemm_backend(GemmBackend backend);

}  // namespace sparq
