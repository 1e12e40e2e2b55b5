// The avx512 backend: sparq's own blocked GEMM for CPUs with AVX-512 (Note [GEMM backends]).
//
// Why: on a CPU whose two FMA pipes are 512 bits wide, Eigen's kernel reached 55-65% of the
// measured FMA peak on the transformer shapes and Debian's OpenBLAS runs its AVX2 kernel
// (docs/layers.md, "GEMM backends"). This is the textbook five-loop blocking (Goto's):
//
//   for jc (NC columns of C)  for pc (KC of K): pack op(B)[pc, jc] into NR-wide panels
//     for ic (MC rows)        pack op(A)[ic, pc] into MR-tall panels
//       for jr, ir            micro-kernel: an MR x NR tile of C += A panel * B panel
//
// The micro-kernel keeps a 12 x 32 tile in 24 zmm accumulators; per k it loads two vectors
// of B and broadcasts 12 values of A into 24 FMAs. An A block (MC x KC) and the B panel
// (KC x NR, 128 KB) the ir loop walks it with stay in L2; per k the kernel reads 176 bytes
// for 12 cycles of FMAs, far below what L2 delivers. KC is long on purpose: each K block
// costs a load and store of C and a pass of both packs, and on GPT-2's products (K of
// 768-3072) the step's GEMM time on one thread fell with KC: 192 1.22x Eigen's, 256 1.25x,
// 384 1.31x, 512 1.36x, 768 1.38x, 1024 1.43x, 1536 and 2048 1.42x (bench_gemm, AMD EPYC
// with AVX-512, 2026-12-03); a B panel that fits L1 (KC 192) was the slowest.
//
// Determinism: every element of C is the sum over K in KC blocks, from pc = 0 upwards, each
// block an FMA chain in k order, added to C as c = alpha * block + c (the first block as
// alpha * block + beta * c, or alpha * block when beta == 0). That order depends on K only,
// not on where the element sits, the chunking or the thread count; so, as Eigen's chunks,
// the result is the same bits for any number of threads. (Products thinner than one tile go
// to Eigen, whose bits are thread-independent too.)
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/gemm_backends.h"
#include "core/threading.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace sparq::gemm_detail {

#ifdef __AVX512F__
namespace {

constexpr std::int64_t kMR = 12, kNR = 32;
constexpr std::int64_t kKC = 1024;
constexpr std::int64_t kMC = 8 * kMR;  // 96 rows: a 384 KB A block (L2)
constexpr std::int64_t kNC = 64 * kNR;  // 2048 columns: an 8 MB B block (L3)
// Threads split C into chunks of whole tiles. Every chunk packs the whole of the other
// operand again: 11 shape-fixed chunks cost a fifth of the LM head's dX product (K = 50304)
// on one thread. The split cannot change any bits (above), so it follows the thread count:
// up to 4 chunks a thread while each keeps kMinChunkRows rows, one a thread for K above
// kChunkedMaxK, none below kMinSplitMacs multiply-adds.
constexpr std::int64_t kChunkAlign = 96;  // a multiple of kMR and kNR
constexpr double kMinSplitMacs = 2.0e6;
constexpr std::int64_t kChunkedMaxK = 4096;
constexpr std::int64_t kMinChunkRows = 512;

// out[k * lanes + l] = rows[l][k] for l < valid (row l starts at src + l * ld), zero for
// valid <= l < lanes: the scalar interleave both packs fall back on.
void interleave_rows(const float* src, std::int64_t ld, std::int64_t valid, std::int64_t lanes,
                     std::int64_t kc, float* out) {
  for (std::int64_t l = 0; l < lanes; ++l) {
    if (l < valid) {
      const float* row = src + l * ld;
      for (std::int64_t k = 0; k < kc; ++k) out[k * lanes + l] = row[k];
    } else {
      for (std::int64_t k = 0; k < kc; ++k) out[k * lanes + l] = 0.0f;
    }
  }
}

// out[k * lanes + l] = src[l * ld + k] for the `lanes` rows at src (a multiple of 4): how
// both packs lay out a full panel whose source runs along K (an untransposed A, 12 rows; a
// transposed B, 32). Per group of 4 rows and 8 k, four loads and eight shuffles make the eight
// 4-float pieces of the packed rows (two 4 x 4 transposes, one per 128-bit half). The scalar
// interleave stored one float at a time and AVX-512 gathers one or two a cycle. On GPT-2
// 124M's products on one thread (bench_gemm, 2026-12-03): for A, with the row walk of
// pack_a, 1.26x Eigen's time -> 1.31x; for B, the step's GEMM time 3.24-3.33 s -> 3.13-3.20 s.
template <int kLanes>
void transpose_rows(const float* src, std::int64_t ld, std::int64_t kc, float* out) {
  static_assert(kLanes % 4 == 0);
  std::int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    for (int g = 0; g < kLanes / 4; ++g) {
      const float* s0 = src + 4 * g * ld + k;
      const __m256 r0 = _mm256_loadu_ps(s0), r1 = _mm256_loadu_ps(s0 + ld);
      const __m256 r2 = _mm256_loadu_ps(s0 + 2 * ld), r3 = _mm256_loadu_ps(s0 + 3 * ld);
      // t0 = (r0 k0, r1 k0, r0 k1, r1 k1 | the same for k4, k5), t1 the same for k2, k3 | k6, k7
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      // column j of the 4 rows in the low half, column j + 4 in the high half
      const __m256 c0 = _mm256_shuffle_ps(t0, t2, 0x44), c1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 c2 = _mm256_shuffle_ps(t1, t3, 0x44), c3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      float* o = out + k * kLanes + 4 * g;
      _mm_storeu_ps(o + 0 * kLanes, _mm256_castps256_ps128(c0));
      _mm_storeu_ps(o + 1 * kLanes, _mm256_castps256_ps128(c1));
      _mm_storeu_ps(o + 2 * kLanes, _mm256_castps256_ps128(c2));
      _mm_storeu_ps(o + 3 * kLanes, _mm256_castps256_ps128(c3));
      _mm_storeu_ps(o + 4 * kLanes, _mm256_extractf128_ps(c0, 1));
      _mm_storeu_ps(o + 5 * kLanes, _mm256_extractf128_ps(c1, 1));
      _mm_storeu_ps(o + 6 * kLanes, _mm256_extractf128_ps(c2, 1));
      _mm_storeu_ps(o + 7 * kLanes, _mm256_extractf128_ps(c3, 1));
    }
  }
  for (; k < kc; ++k) {
    for (std::int64_t r = 0; r < kLanes; ++r) out[k * kLanes + r] = src[r * ld + k];
  }
}

// ap[(panel * kc + k) * kMR + r] = op(A)[i0 + panel * kMR + r, p0 + k], zero past row m.
void pack_a(const GemmShape& s, const float* a, std::int64_t i0, std::int64_t mc,
            std::int64_t p0, std::int64_t kc, float* ap) {
  const std::int64_t panels = (mc + kMR - 1) / kMR;
  if (s.trans_a) {
    // op(A)[., p] is row p of A: walk each row once, left to right, handing 12 floats to each
    // panel (one masked load and store; lanes past the last row load as zeros). Panel by
    // panel, the reads were 48 bytes every lda floats, which the prefetcher did not follow.
    constexpr __mmask16 kStore = (1u << kMR) - 1u;
    const std::int64_t last_rows = mc - (panels - 1) * kMR;
    const __mmask16 last = static_cast<__mmask16>((1u << last_rows) - 1u);
    for (std::int64_t k = 0; k < kc; ++k) {
      const float* src = a + (p0 + k) * s.lda + i0;
      float* out = ap + k * kMR;
      for (std::int64_t panel = 0; panel < panels; ++panel) {
        const __mmask16 load = panel + 1 < panels ? kStore : last;
        _mm512_mask_storeu_ps(out + panel * kc * kMR, kStore,
                              _mm512_maskz_loadu_ps(load, src + panel * kMR));
      }
    }
    return;
  }
  for (std::int64_t panel = 0; panel < panels; ++panel) {
    float* out = ap + panel * kc * kMR;
    const std::int64_t rows = std::min(kMR, mc - panel * kMR);
    const float* src = a + (i0 + panel * kMR) * s.lda + p0;
    if (rows == kMR) {
      transpose_rows<kMR>(src, s.lda, kc, out);
    } else {
      interleave_rows(src, s.lda, rows, kMR, kc, out);
    }
  }
}

// bp[(panel * kc + k) * kNR + c] = op(B)[p0 + k, j0 + panel * kNR + c], zero past column n.
void pack_b(const GemmShape& s, const float* b, std::int64_t j0, std::int64_t nc,
            std::int64_t p0, std::int64_t kc, float* bp) {
  for (std::int64_t panel = 0; panel * kNR < nc; ++panel) {
    float* out = bp + panel * kc * kNR;
    const std::int64_t cols = std::min(kNR, nc - panel * kNR);
    const std::int64_t j = j0 + panel * kNR;
    if (!s.trans_b) {
      for (std::int64_t k = 0; k < kc; ++k) {
        const float* src = b + (p0 + k) * s.ldb + j;
        if (cols == kNR) {
          _mm512_storeu_ps(out + k * kNR, _mm512_loadu_ps(src));
          _mm512_storeu_ps(out + k * kNR + 16, _mm512_loadu_ps(src + 16));
        } else {
          for (std::int64_t c = 0; c < cols; ++c) out[k * kNR + c] = src[c];
          for (std::int64_t c = cols; c < kNR; ++c) out[k * kNR + c] = 0.0f;
        }
      }
    } else if (cols == kNR) {  // op(B)[p, j] = B[j, p]: a full panel reads 32 rows of B
      transpose_rows<kNR>(b + j * s.ldb + p0, s.ldb, kc, out);
    } else {  // op(B)[p, j] = B[j, p]: walk each column's row of B
      interleave_rows(b + j * s.ldb + p0, s.ldb, cols, kNR, kc, out);
    }
  }
}

// C[rows, cols] (rows <= kMR, cols <= kNR) = alpha * A_panel B_panel + beta * C, with beta
// 0 meaning "do not read C". The full tile is always computed; only rows x cols are stored.
void micro_kernel(std::int64_t kc, const float* ap, const float* bp, float* c,
                  std::int64_t ldc, std::int64_t rows, std::int64_t cols, float alpha,
                  float beta) {
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(bp + k * kNR);
    const __m512 b1 = _mm512_loadu_ps(bp + k * kNR + 16);
    const float* a = ap + k * kMR;
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1u);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xffff)
                       : cols > 16 ? __mmask16((1u << (cols - 16)) - 1u) : __mmask16(0);
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) {
    if (r >= rows) break;
    float* row = c + r * ldc;
    __m512 out0 = _mm512_mul_ps(va, acc[r][0]), out1 = _mm512_mul_ps(va, acc[r][1]);
    if (beta != 0.0f) {
      out0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), out0);
      out1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), out1);
    }
    _mm512_mask_storeu_ps(row, m0, out0);
    _mm512_mask_storeu_ps(row + 16, m1, out1);
  }
}

struct Scratch {
  std::vector<float> a, b;
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

void single_threaded(const GemmShape& s, float alpha, const float* a, const float* b,
                     float beta, float* c) {
  Scratch& buf = thread_scratch();
  const std::int64_t nc_max = std::min(kNC, (s.n + kNR - 1) / kNR * kNR);
  const std::int64_t mc_max = std::min(kMC, (s.m + kMR - 1) / kMR * kMR);
  const std::int64_t kc_max = std::min(kKC, s.k);
  buf.b.resize(static_cast<std::size_t>(nc_max * kc_max));
  buf.a.resize(static_cast<std::size_t>(mc_max * kc_max));
  for (std::int64_t jc = 0; jc < s.n; jc += kNC) {
    const std::int64_t nc = std::min(kNC, s.n - jc);
    for (std::int64_t pc = 0; pc < s.k; pc += kKC) {
      const std::int64_t kc = std::min(kKC, s.k - pc);
      // The first K block applies the caller's beta, later ones add to what is there.
      const float block_beta = pc == 0 ? beta : 1.0f;
      pack_b(s, b, jc, nc, pc, kc, buf.b.data());
      for (std::int64_t ic = 0; ic < s.m; ic += kMC) {
        const std::int64_t mc = std::min(kMC, s.m - ic);
        pack_a(s, a, ic, mc, pc, kc, buf.a.data());
        for (std::int64_t jr = 0; jr < nc; jr += kNR) {
          const float* bp = buf.b.data() + (jr / kNR) * kc * kNR;
          for (std::int64_t ir = 0; ir < mc; ir += kMR) {
            micro_kernel(kc, buf.a.data() + (ir / kMR) * kc * kMR, bp,
                         c + (ic + ir) * s.ldc + jc + jr, s.ldc, std::min(kMR, mc - ir),
                         std::min(kNR, nc - jr), alpha, block_beta);
          }
        }
      }
    }
  }
}

}  // namespace

bool avx512_available() { return true; }

void avx512_gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta,
                 float* c) {
  // A product thinner than one tile would waste most of each 12 x 32 tile: Eigen's kernel
  // does those (VGG's 2x2 and 4x4 maps, the first convolution's 27-wide weight gradient).
  if (s.n < kNR || s.m < kMR) return eigen_gemm(s, alpha, a, b, beta, c);
  // Split the longer of M and N, so the repacked operand is the smaller one.
  const bool split_n = s.n >= s.m;
  const std::int64_t dim = split_n ? s.n : s.m;
  const int threads = team_size() == 1 ? max_threads() : 1;
  std::int64_t chunk = dim;
  if (threads > 1 && static_cast<double>(s.m) * static_cast<double>(s.n) *
                             static_cast<double>(s.k) >= kMinSplitMacs) {
    // Several chunks per thread balance a core that another process slows, but every chunk
    // repacks the other operand, one packed float per `chunk` multiply-adds: so up to 4 a
    // thread while chunks keep kMinChunkRows, and one with a long K.
    const std::int64_t per_thread =
        s.k <= kChunkedMaxK ? std::clamp<std::int64_t>(dim / (threads * kMinChunkRows), 1, 4) : 1;
    chunk = std::max((dim + threads * per_thread - 1) / (threads * per_thread), kChunkAlign);
    chunk = (chunk + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  }
  for_each_chunk(s, a, b, c, split_n, chunk, team_size(),
                 [&](const GemmShape& part, const float* pa, const float* pb, float* pc) {
                   single_threaded(part, alpha, pa, pb, beta, pc);
                 });
}

#else  // no AVX-512 in this build: the backend is not available

bool avx512_available() { return false; }

void avx512_gemm(const GemmShape&, float, const float*, const float*, float, float*) {}

#endif

}  // namespace sparq::gemm_detail
