// Building blocks of the CPU flash-attention kernel (attention_flash.cpp): a register-blocked
// tile product and a vectorized exp, on GCC/Clang vector extensions (one register wide:
// kVecBytes; test_portable_kernels builds the AVX2 and SSE widths), so no intrinsics and no
// -ffast-math are needed and the same source serves float (production) and double (the
// finite-difference tests). Internal to the attention kernels; not a general GEMM.
//
// Every routine has a fixed evaluation order that depends only on its arguments, never on the
// thread running it: the kernels' results are independent of the OpenMP thread count.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "layers/vector_math.h"

namespace sparq::cpu::attn_tile {

// One vector is one register of the target: 64 bytes with AVX-512, 32 with AVX2, 16 below.
// (A 64-byte vector without AVX-512 lives in memory: the kernel ran 13-16x slower than the
// materialized one on an AVX2 build, bench_attention, 2026-12-06.) The lane count changes
// the order of row_max/row_sum's partials, so results differ between such builds, as every
// vectorized reduction's do; within one build they depend on nothing else.
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif

template <typename T>
struct VecOf {
  typedef T type __attribute__((vector_size(kVecBytes)));
};
template <typename T>
using Vec = typename VecOf<T>::type;

// Elements per vector: 16 floats or 8 doubles with AVX-512.
template <typename T>
constexpr int kLanes = kVecBytes / static_cast<int>(sizeof(T));

template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);  // unaligned load; the packed operands are dense rows
  return v;
}
template <typename T>
inline void store(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

// An empty asm that claims to modify v: the compiler must hold v in a vector register
// instead of folding a fresh load of it into every FMA that uses it (which would make the
// block product load-bound: 16 loads per 16 FMAs instead of 4). v is one register wide
// (kVecBytes): a wider one has no "v" operand, and the asm did not compile on AVX2 machines
// while vectors were 64 bytes everywhere (review, 2026-12-06).
template <typename V>
inline void keep_in_register(V& v) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static_assert(sizeof(V) == kVecBytes, "one register per vector");
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

// C[rows, cols] = (accumulate ? C : 0) + sum_k A(r, k) * B[k, cols] for k < depth, where
// A(r, k) = a[r * a_row + k * a_col] (any layout, read as broadcast scalars) and B has
// contiguous rows of stride ldb. rows % 4 == 0 and cols % kLanes<T> == 0: the callers pad.
// A block of kRows rows x up to 4 vectors keeps its accumulators in registers over the whole
// depth.
template <typename T, int kRows, int kVecs>
inline void product_block(std::int64_t depth, const T* a, std::ptrdiff_t a_row,
                          std::ptrdiff_t a_col, const T* b, std::ptrdiff_t ldb, T* c,
                          std::ptrdiff_t ldc, bool accumulate) {
  constexpr int w = kLanes<T>;
  Vec<T> acc[kRows][kVecs];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVecs; ++v) acc[r][v] = accumulate ? load(c + r * ldc + v * w) : Vec<T>{};
  }
  for (std::int64_t k = 0; k < depth; ++k) {
    Vec<T> bv[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      bv[v] = load(b + k * ldb + v * w);
      keep_in_register(bv[v]);
    }
    for (int r = 0; r < kRows; ++r) {
      const T av = a[r * a_row + k * a_col];
      for (int v = 0; v < kVecs; ++v) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVecs; ++v) store(c + r * ldc + v * w, acc[r][v]);
  }
}

// Vectors per block row: 4 rows x 4 accumulators + 4 operands fit AVX-512's 32 registers;
// AVX2's 16 take 4 x 2 + 2 (bench_attention on an x86-64-v3 build, 2 threads, 2026-12-06:
// flash/materialized 1.09-1.42 with 4 x 4, which spills, 0.86-1.13 with 4 x 2 or 4 x 3).
constexpr int kBlockVecs = kVecBytes >= 64 ? 4 : 2;

template <typename T, int kRows>
inline void product_rows(std::int64_t cols, std::int64_t depth, const T* a, std::ptrdiff_t a_row,
                         std::ptrdiff_t a_col, const T* b, std::ptrdiff_t ldb, T* c,
                         std::ptrdiff_t ldc, bool accumulate) {
  constexpr int w = kLanes<T>;
  std::int64_t col = 0;
  for (; col + kBlockVecs * w <= cols; col += kBlockVecs * w) {
    product_block<T, kRows, kBlockVecs>(depth, a, a_row, a_col, b + col, ldb, c + col, ldc,
                                        accumulate);
  }
  switch ((cols - col) / w) {
    case 3: product_block<T, kRows, 3>(depth, a, a_row, a_col, b + col, ldb, c + col, ldc, accumulate); break;
    case 2: product_block<T, kRows, 2>(depth, a, a_row, a_col, b + col, ldb, c + col, ldc, accumulate); break;
    case 1: product_block<T, kRows, 1>(depth, a, a_row, a_col, b + col, ldb, c + col, ldc, accumulate); break;
    default: break;
  }
}

template <typename T>
inline void tile_product(std::int64_t rows, std::int64_t cols, std::int64_t depth, const T* a,
                         std::ptrdiff_t a_row, std::ptrdiff_t a_col, const T* b,
                         std::ptrdiff_t ldb, T* c, std::ptrdiff_t ldc, bool accumulate) {
  // Blocks of 4 rows: 16 accumulators and 8 loads per 16 FMAs. (6-row blocks, 24
  // accumulators, measured no faster: the FMAs are the limit once B stays in registers.)
  for (std::int64_t r = 0; r < rows; r += 4) {
    product_rows<T, 4>(cols, depth, a + r * a_row, a_row, a_col, b, ldb, c + r * ldc, ldc, accumulate);
  }
}

// exp(x) for x <= 0 (including -inf, which gives 0), in place on n elements: float through
// vector_math.h's exp_nonpositive (within 2 ulp of expf; below -87 it gives 0, a negligible
// softmax weight), in a loop the compiler vectorizes; double (tests only): std::exp.
inline void exp_nonpositive(float* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) x[i] = cpu::exp_nonpositive(x[i]);
}
inline void exp_nonpositive(double* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

// Largest element and sum of a row of n elements, n % kLanes == 0, lane-parallel partials
// combined in a fixed order.
template <typename T>
inline T row_max(const T* x, std::int64_t n) {
  Vec<T> m = load(x);
  for (std::int64_t i = kLanes<T>; i < n; i += kLanes<T>) {
    const Vec<T> v = load(x + i);
    m = v > m ? v : m;
  }
  T best = m[0];
  for (int l = 1; l < kLanes<T>; ++l) best = m[l] > best ? m[l] : best;
  return best;
}
template <typename T>
inline T row_sum(const T* x, std::int64_t n) {
  Vec<T> s{};
  for (std::int64_t i = 0; i < n; i += kLanes<T>) s += load(x + i);
  T total = 0;
  for (int l = 0; l < kLanes<T>; ++l) total += s[l];
  return total;
}

}  // namespace sparq::cpu::attn_tile
