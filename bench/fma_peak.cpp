#include "fma_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>

namespace sparq::bench {
namespace {

// One explicit vfmadd per chain per iteration, on ymm (8 lanes, AVX2+FMA) or zmm (16 lanes,
// AVX-512) registers. Intrinsics, not `a * b + c`: in strict ISO mode GCC does not contract
// that into an FMA. Twelve independent chains hide the FMA latency (4-5 cycles, 2 ports).
// The peak is the faster of the two widths: the real ceiling for Eigen's kernels. The
// chains feed the returned sum, so the compiler cannot drop them (no asm barrier: it would
// force spills on some compilers and halve the figure).
constexpr int kChains = 12;

template <typename Vec, Vec (*Fma)(Vec, Vec, Vec), Vec (*Set)(float), float (*First)(Vec)>
float fma_chains(long iterations) {
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Set(0.001f * static_cast<float>(c + 1));
  const Vec mul = Set(0.999999f), add = Set(1e-7f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = Fma(acc[c], mul, add);
  }
  float sink = 0;
  for (int c = 0; c < kChains; ++c) sink += First(acc[c]);  // keeps the loop alive
  return sink;
}

__m256 fma256(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
__m256 set256(float x) { return _mm256_set1_ps(x); }
float first256(__m256 x) { return _mm256_cvtss_f32(x); }
#ifdef __AVX512F__
__m512 fma512(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
__m512 set512(float x) { return _mm512_set1_ps(x); }
float first512(__m512 x) { return _mm512_cvtss_f32(x); }
#endif

template <int W>
float fma_loop(long iterations) {
#ifdef __AVX512F__
  if constexpr (W == 16) return fma_chains<__m512, fma512, set512, first512>(iterations);
#endif
  return fma_chains<__m256, fma256, set256, first256>(iterations);
}

template <int W>
double measure_width(int threads) {
  const long iterations = 20'000'000 / (W / 8);
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += fma_loop<W>(iterations);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double flops = 2.0 * W * kChains * static_cast<double>(iterations) * threads;
    if (sink != 12345.0) best = std::max(best, flops / s / 1e9);
  }
  return best;
}

}  // namespace

double measure_fma_peak_gflops(int threads) {
  double peak = measure_width<8>(threads);
#ifdef __AVX512F__
  peak = std::max(peak, measure_width<16>(threads));
#endif
  return peak;
}

}  // namespace sparq::bench
