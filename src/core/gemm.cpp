// gemm()'s front: shape checks, empty cases, the backend switch (Note [GEMM backends]) and
// the double-precision reference.
#include "core/gemm.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "core/gemm_backends.h"
#include "core/log.h"

#ifndef SPARQ_GEMM_DEFAULT_NAME
#define SPARQ_GEMM_DEFAULT_NAME "openblas"
#endif

namespace sparq {
namespace {

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

// Empty products: C = beta * C over m x n (nothing for m or n == 0). Handled here so the
// backends never see a zero size (CBLAS rejects lda == 0).
void scale_only(const GemmShape& s, float beta, float* c) {
  for (std::int64_t i = 0; i < s.m; ++i) {
    float* row = c + i * s.ldc;
    for (std::int64_t j = 0; j < s.n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
  }
}

// The fastest backend that needs no library: avx512 where the build has AVX-512 (1.1-1.3x
// Eigen on every model's step, docs/layers.md), else Eigen.
GemmBackend builtin_backend() {
  return gemm_detail::avx512_available() ? GemmBackend::kAvx512 : GemmBackend::kEigen;
}

// The first active backend: SPARQ_GEMM if set (must be available), else the build default
// (falls back to the built-in one when its library is missing).
GemmBackend initial_backend() {
  if (const char* env = std::getenv("SPARQ_GEMM"); env != nullptr && *env != '\0') {
    const GemmBackend b = parse_gemm_backend(env, "SPARQ_GEMM");
    std::string why;
    SPARQ_CHECK(gemm_backend_available(b, &why), "SPARQ_GEMM={} but its library is missing ({})",
                env, why);
    return b;
  }
  const GemmBackend b = parse_gemm_backend(SPARQ_GEMM_DEFAULT_NAME, "SPARQ_GEMM_DEFAULT");
  if (std::string why; !gemm_backend_available(b, &why)) {
    spdlog::warn("GEMM backend {} (the build default) is not available ({}); using {}",
                 gemm_backend_name(b), why, gemm_backend_name(builtin_backend()));
    return builtin_backend();
  }
#ifdef __AVX512F__
  if (b == GemmBackend::kOpenBlas) {
    const std::string core = gemm_detail::cblas_core_name(b);
    if (!openblas_core_has_avx512(core)) {
      spdlog::info("GEMM backend avx512: OpenBLAS runs its {} kernel here, without the "
                   "AVX-512 this build has (SPARQ_GEMM=openblas to use it anyway)", core);
      return GemmBackend::kAvx512;
    }
  }
#endif
  return b;
}

std::atomic<GemmBackend>& active_backend() {
  static std::atomic<GemmBackend> active{initial_backend()};
  return active;
}

}  // namespace

bool openblas_core_has_avx512(std::string_view core) {
  if (core.empty()) return true;
  std::string lower(core);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (std::string_view avx512 : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (lower == avx512) return true;
  }
  return false;
}

std::string_view gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kEigen: return "eigen";
    case GemmBackend::kOpenBlas: return "openblas";
    case GemmBackend::kBlis: return "blis";
    case GemmBackend::kAvx512: return "avx512";
  }
  return "?";
}

GemmBackend parse_gemm_backend(std::string_view name, std::string_view what) {
  for (GemmBackend b : kAllGemmBackends) {
    if (gemm_backend_name(b) == name) return b;
  }
  SPARQ_FATAL("{}: unknown GEMM backend '{}' (expected eigen, openblas, blis or avx512)", what,
              name);
}

bool gemm_backend_available(GemmBackend backend, std::string* why) {
  if (backend == GemmBackend::kEigen) return true;
  if (backend == GemmBackend::kAvx512) {
    if (!gemm_detail::avx512_available() && why) *why = "this build has no AVX-512";
    return gemm_detail::avx512_available();
  }
  return gemm_detail::cblas_available(backend, why);
}

std::string gemm_backend_library(GemmBackend backend) {
  if (backend == GemmBackend::kEigen || backend == GemmBackend::kAvx512) return std::string();
  return gemm_detail::cblas_library_path(backend);
}

GemmBackend gemm_backend() { return active_backend().load(std::memory_order_relaxed); }
std::string_view gemm_backend_name() { return gemm_backend_name(gemm_backend()); }

void set_gemm_backend(GemmBackend backend) {
  std::string why;
  SPARQ_CHECK(gemm_backend_available(backend, &why), "GEMM backend {} is not available ({})",
              gemm_backend_name(backend), why);
  active_backend().store(backend, std::memory_order_relaxed);
}

void gemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta,
          float* c) {
  const GemmShape s = resolved(shape);
  if (s.m == 0 || s.n == 0 || s.k == 0) return scale_only(s, beta, c);
  const GemmBackend backend = gemm_backend();
  if (backend == GemmBackend::kEigen) {
    gemm_detail::eigen_gemm(s, alpha, a, b, beta, c);
  } else if (backend == GemmBackend::kAvx512) {
    gemm_detail::avx512_gemm(s, alpha, a, b, beta, c);
  } else {
    gemm_detail::cblas_gemm(backend, s, alpha, a, b, beta, c);
  }
}

void gemm_strided_batched(const GemmShape& shape, float alpha, const float* a,
                          std::int64_t stride_a, const float* b, std::int64_t stride_b,
                          float beta, float* c, std::int64_t stride_c, std::int64_t batch) {
  const GemmShape s = resolved(shape);
  // Eigen runs single-threaded inside an active OpenMP region, so parallelism is per batch.
#pragma omp parallel for schedule(dynamic) if (batch > 1)
  for (std::int64_t i = 0; i < batch; ++i) {
    if (s.m == 0 || s.n == 0 || s.k == 0) {
      scale_only(s, beta, c + i * stride_c);
    } else {
      gemm_detail::eigen_gemm(s, alpha, a + i * stride_a, b + i * stride_b, beta, c + i * stride_c);
    }
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
