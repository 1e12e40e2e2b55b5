// Note [bf16 GEMM operands] (core/cuda/mixed_gemm.h) on the device: the bf16 cast is the
// host's rounding bit for bit, and a bf16 product is the f32 product of bf16-rounded
// operands up to the summation order, for every transpose, padded leading dimensions,
// alpha/beta and batched strides; a context's layer_gemm multiplies in its precision. Guard
// bands around every output. The extent test runs wherever sparq is built with CUDA; the
// others skip without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/device_test_util.h"
#include "core/gemm.h"
#include "core/half_math.h"
#include "core/rng.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_gemm.h"
#include "core/cuda/cuda_ops.h"
#include "core/cuda/mixed_gemm.h"
#endif

namespace sparq {
namespace {

#if SPARQ_HAS_CUDA
using testing::GuardedDeviceArray;

TEST(Bf16Operands, ExtentsCoverTheStoredOperands) {
  // op(A) [5, 7] plain: 5 rows of 7; transposed: stored [7, 5]; with ld 9: 4 * 9 + 7.
  EXPECT_EQ(cuda::operand_a_extent(GemmShape{false, false, 5, 3, 7}), 35);
  EXPECT_EQ(cuda::operand_a_extent(GemmShape{true, false, 5, 3, 7}), 35);
  EXPECT_EQ(cuda::operand_a_extent(GemmShape{false, false, 5, 3, 7, 9}), 4 * 9 + 7);
  EXPECT_EQ(cuda::operand_a_extent(GemmShape{true, false, 5, 3, 7, 9}), 6 * 9 + 5);
  // op(B) [7, 3]: plain 7 rows of 3, transposed stored [3, 7].
  EXPECT_EQ(cuda::operand_b_extent(GemmShape{false, false, 5, 3, 7, 0, 4}), 6 * 4 + 3);
  EXPECT_EQ(cuda::operand_b_extent(GemmShape{false, true, 5, 3, 7, 0, 8}), 2 * 8 + 7);
  EXPECT_EQ(cuda::operand_b_extent(GemmShape{false, true, 5, 0, 7}), 0);
}

float round_to_bf16(float v) { return float_of_bf16_bits(bf16_bits_of(v)); }

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  fill_uniform(v.data(), n, -1, 1, seed, 1);
  return v;
}

TEST(CudaBf16, CastIsTheHostRoundingBitForBit) {
  SPARQ_SKIP_WITHOUT_GPU();
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.5f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(),  // rounds up to Inf
                          std::numeric_limits<float>::denorm_min(),
                          1e-40f,
                          bits_as_float(0x3f808000u),   // a tie with an even bf16: stays
                          bits_as_float(0x3f818000u),   // a tie with an odd bf16: rounds up
                          bits_as_float(0x3f808001u)};  // just above a tie
  for (std::uint64_t i = 0; i < 4099; ++i) {  // every exponent, random mantissas and signs
    x.push_back(bits_as_float(random_u32_at(5, 1, i)));
  }
  GuardedDeviceArray<float> src(x);
  GuardedDeviceArray<std::uint16_t> dst(x.size());
  cuda::Stream stream;
  cuda::cast_to_bf16(src.data(), dst.data(), x.size(), stream.get());
  const auto got = dst.download();
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(got[i], bf16_bits_of(x[i])) << i << " " << x[i];
  }
  EXPECT_TRUE(dst.guards_intact());
}

// The double-precision product of the bf16-rounded operands, and its bound: f32 summation
// of k exact products errs by at most about k * 2^-24 of sum |alpha a b| (+ |beta c|).
struct Reference {
  std::vector<double> value, magnitude;
};

Reference rounded_reference(const GemmShape& s, float alpha, const std::vector<float>& a,
                            const std::vector<float>& b, float beta, const std::vector<float>& c,
                            bool round) {
  const std::int64_t lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
  const std::int64_t ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
  const std::int64_t ldc = s.ldc ? s.ldc : s.n;
  const auto r = [&](float v) { return static_cast<double>(round ? round_to_bf16(v) : v); };
  // Entries of C outside the m x n product (padding columns past n) stay what they were.
  Reference ref{std::vector<double>(c.begin(), c.end()), std::vector<double>(c.size())};
  for (std::size_t e = 0; e < c.size(); ++e) ref.magnitude[e] = std::abs(c[e]);
  for (std::int64_t i = 0; i < s.m; ++i) {
    for (std::int64_t j = 0; j < s.n; ++j) {
      double sum = 0, mag = 0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        const double av = r(s.trans_a ? a[p * lda + i] : a[i * lda + p]);
        const double bv = r(s.trans_b ? b[j * ldb + p] : b[p * ldb + j]);
        sum += av * bv;
        mag += std::abs(av * bv);
      }
      const double old = c[i * ldc + j];
      ref.value[i * ldc + j] = alpha * sum + beta * old;
      ref.magnitude[i * ldc + j] = std::abs(alpha) * mag + std::abs(beta * old);
    }
  }
  return ref;
}

// Checks got against the reference within k * 2^-23 of each element's magnitude; returns the
// largest deviation from `unrounded` relative to that bound (how far rounding moved it).
double expect_within(const std::vector<float>& got, const Reference& ref,
                     const Reference& unrounded, std::int64_t k, const char* what) {
  double moved = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double bound = static_cast<double>(k + 2) * 0x1p-23 * ref.magnitude[e] + 1e-30;
    EXPECT_LE(std::abs(got[e] - ref.value[e]), bound) << what << " element " << e;
    moved = std::max(moved, std::abs(got[e] - unrounded.value[e]) / bound);
  }
  return moved;
}

TEST(CudaBf16, GemmIsTheProductOfRoundedOperands) {
  SPARQ_SKIP_WITHOUT_GPU();
  cuda::CublasHandle handle;
  cuda::Stream stream;
  handle.set_stream(stream.get());
  const std::int64_t m = 67, n = 45, k = 129;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      // Padded leading dimensions, as attention's strided operands have.
      const std::int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
      const GemmShape s{ta == 1, tb == 1, m, n, k, lda, ldb, ldc};
      const auto a = uniform((ta ? k : m) * lda, 11), b = uniform((tb ? n : k) * ldb, 12);
      const auto c = uniform(m * ldc, 13);
      GuardedDeviceArray<float> da(a), db(b), dc(c);
      GuardedDeviceArray<std::uint16_t> a16(a.size()), b16(b.size());
      cuda::cast_to_bf16(da.data(), a16.data(), a.size(), stream.get());
      cuda::cast_to_bf16(db.data(), b16.data(), b.size(), stream.get());
      cuda::gemm_bf16(handle, s, 1.5f, a16.data(), b16.data(), 0.5f, dc.data());
      const auto got = dc.download();
      const Reference want = rounded_reference(s, 1.5f, a, b, 0.5f, c, true);
      const Reference f32 = rounded_reference(s, 1.5f, a, b, 0.5f, c, false);
      // The bf16 rounding of the operands moves the result far outside the f32 bound (a
      // correctly rounded f32 product stays within 1; the rounding gives about 55-60 here,
      // simulated in float64): the product really multiplied bf16 values.
      EXPECT_GT(expect_within(got, want, f32, k, "gemm_bf16"), 20) << ta << tb;
      for (int j = 0; j < 2; ++j) {  // C's padding columns are untouched
        for (std::int64_t i = 0; i < m; ++i) ASSERT_EQ(got[i * ldc + n + j], c[i * ldc + n + j]);
      }
      EXPECT_TRUE(dc.guards_intact());
    }
  }
}

TEST(CudaBf16, StridedBatchedGemmIsTheProductOfRoundedOperands) {
  SPARQ_SKIP_WITHOUT_GPU();
  cuda::CublasHandle handle;
  cuda::Stream stream;
  handle.set_stream(stream.get());
  // Attention's scores: q k^T per head, q and k interleaved in rows of 3C, heads D apart.
  const std::int64_t t = 37, d = 16, heads = 3, c = heads * d;
  const GemmShape s{false, true, t, t, d, 3 * c, 3 * c, t};
  const auto qkv = uniform(t * 3 * c, 21);
  GuardedDeviceArray<float> dqkv(qkv), scores(heads * t * t);
  GuardedDeviceArray<std::uint16_t> q16(qkv.size());
  cuda::cast_to_bf16(dqkv.data(), q16.data(), qkv.size(), stream.get());
  cuda::gemm_strided_batched_bf16(handle, s, 0.25f, q16.data(), d, q16.data() + c, d, 0.0f,
                                  scores.data(), t * t, static_cast<int>(heads));
  const auto got = scores.download();
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::vector<float> a(qkv.begin() + h * d, qkv.end());
    const std::vector<float> b(qkv.begin() + c + h * d, qkv.end());
    const std::vector<float> zero(t * t, 0.0f);
    const std::vector<float> head(got.begin() + h * t * t, got.begin() + (h + 1) * t * t);
    // The operands as the reference reads them: the slices from each head's first element.
    std::vector<float> pa(a.begin(), a.end()), pb(b.begin(), b.end());
    pa.resize(static_cast<std::size_t>((t - 1) * 3 * c + d));
    pb.resize(static_cast<std::size_t>((t - 1) * 3 * c + d));
    expect_within(head, rounded_reference(s, 0.25f, pa, pb, 0.0f, zero, true),
                  rounded_reference(s, 0.25f, pa, pb, 0.0f, zero, false), d, "batched");
  }
  EXPECT_TRUE(scores.guards_intact());
}

TEST(CudaBf16, LayerGemmMultipliesInTheContextPrecision) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto f32_ctx = ExecContext::create_cuda(0, GemmPrecision::kF32);
  auto bf16_ctx = ExecContext::create_cuda(0, GemmPrecision::kBF16);
  ASSERT_TRUE(f32_ctx.is_ok() && bf16_ctx.is_ok());
  EXPECT_EQ((*bf16_ctx)->gemm_precision(), GemmPrecision::kBF16);
  EXPECT_EQ(ExecContext::cpu().gemm_precision(), GemmPrecision::kF32);
  const std::int64_t m = 33, n = 65, k = 257;
  const GemmShape s{false, true, m, n, k};  // Linear's forward: x w^T
  const auto a = uniform(m * k, 31), b = uniform(n * k, 32), c = uniform(m * n, 33);
  const Reference rounded = rounded_reference(s, 1.0f, a, b, 1.0f, c, true);
  const Reference exact = rounded_reference(s, 1.0f, a, b, 1.0f, c, false);
  for (const auto* ctx : {&*f32_ctx, &*bf16_ctx}) {
    const bool bf16 = (*ctx)->gemm_precision() == GemmPrecision::kBF16;
    GuardedDeviceArray<float> da(a), db(b), dc(c);
    cuda::layer_gemm((*ctx)->cuda(), s, 1.0f, da.data(), db.data(), 1.0f, dc.data());
    const auto got = dc.download();
    if (bf16) {
      // About 19-22 for these shapes (simulated in float64); f32 stays within 1.
      EXPECT_GT(expect_within(got, rounded, exact, k, "layer_gemm bf16"), 8);
      EXPECT_GE((*ctx)->cuda().bf16_staging.bytes(), static_cast<std::size_t>(2 * (m + n) * k));
    } else {
      expect_within(got, exact, exact, k, "layer_gemm f32");
      EXPECT_EQ((*ctx)->cuda().bf16_staging.bytes(), 0u);
    }
    EXPECT_TRUE(dc.guards_intact());
  }
}
#endif

}  // namespace
}  // namespace sparq
