// Every GEMM backend (Note [GEMM backends]) against the double-precision triple loop, the
// beta == 0 contract, and thread-count independence on the models' shapes. A backend whose
// library is not installed is skipped with the list of files tried.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/gemm.h"
#include "core/rng.h"
#include "core/threading.h"

namespace sparq {
namespace {

// Switches the active backend for one test and restores the previous one.
class BackendScope {
 public:
  explicit BackendScope(GemmBackend b) : previous_(gemm_backend()) { set_gemm_backend(b); }
  ~BackendScope() { set_gemm_backend(previous_); }

 private:
  GemmBackend previous_;
};

#define SKIP_IF_UNAVAILABLE(backend)                                                  \
  do {                                                                                \
    std::string why;                                                                  \
    if (!gemm_backend_available(backend, &why)) {                                     \
      GTEST_SKIP() << gemm_backend_name(backend) << " not installed: " << why;        \
    }                                                                                 \
  } while (0)

struct Case {
  bool ta, tb;
  std::int64_t m, n, k;
  std::int64_t pad;  // extra columns in every leading dimension (strided views)
  float alpha, beta;
};

std::string backend_param_name(GemmBackend b) { return std::string(gemm_backend_name(b)); }

class GemmTest : public ::testing::TestWithParam<std::tuple<GemmBackend, Case>> {};

TEST_P(GemmTest, MatchesNaiveTripleLoop) {
  const auto [backend, c] = GetParam();
  SKIP_IF_UNAVAILABLE(backend);
  BackendScope scope(backend);
  GemmShape s{c.ta, c.tb, c.m, c.n, c.k};
  s.lda = (c.ta ? c.m : c.k) + c.pad;
  s.ldb = (c.tb ? c.k : c.n) + c.pad;
  s.ldc = c.n + c.pad;
  const std::int64_t rows_a = c.ta ? c.k : c.m, rows_b = c.tb ? c.n : c.k;
  std::vector<float> a(rows_a * s.lda), b(rows_b * s.ldb), out(c.m * s.ldc), ref;
  fill_uniform(a.data(), a.size(), -1, 1, 1, 1);
  fill_uniform(b.data(), b.size(), -1, 1, 1, 2);
  fill_uniform(out.data(), out.size(), -1, 1, 1, 3);
  ref = out;
  gemm(s, c.alpha, a.data(), b.data(), c.beta, out.data());
  gemm_reference(s, c.alpha, a.data(), b.data(), c.beta, ref.data());
  const float tol = 1e-5f * static_cast<float>(std::max<std::int64_t>(c.k, 1));
  for (std::int64_t i = 0; i < c.m; ++i) {
    for (std::int64_t j = 0; j < s.ldc; ++j) {
      const float want = ref[i * s.ldc + j];
      // Columns past n (the padding) must be untouched.
      if (j >= c.n) {
        ASSERT_EQ(out[i * s.ldc + j], want) << "padding written at " << i << "," << j;
      } else {
        ASSERT_NEAR(out[i * s.ldc + j], want, tol) << i << "," << j;
      }
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // Small and odd sizes, plus some past the BLAS libraries' small-matrix cut-offs.
  const std::tuple<int, int, int> shapes[] = {{1, 1, 1},    {7, 5, 3},     {33, 17, 65},
                                              {64, 1, 127}, {1, 129, 31},  {100, 96, 0},
                                              {0, 5, 4},    {131, 97, 300},
                                              // avx512: past one A block (240 rows) and
                                              // one B block (2048 columns); a last tile
                                              // with 9 rows and 18 columns (both masks)
                                              {250, 2080, 20}, {45, 50, 17}};
  for (auto [m, n, k] : shapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        v.push_back({ta == 1, tb == 1, m, n, k, 0, 1.0f, 0.0f});
        v.push_back({ta == 1, tb == 1, m, n, k, 3, -0.5f, 1.0f});
        v.push_back({ta == 1, tb == 1, m, n, k, 1, 2.0f, 0.25f});
      }
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::ValuesIn(kAllGemmBackends),
                                            ::testing::ValuesIn(cases())));

class GemmBackendTest : public ::testing::TestWithParam<GemmBackend> {};

TEST_P(GemmBackendTest, BetaZeroIgnoresGarbageInC) {
  SKIP_IF_UNAVAILABLE(GetParam());
  BackendScope scope(GetParam());
  {
    GemmShape s{false, false, 2, 2, 2};
    const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    float c[] = {NAN, NAN, NAN, NAN};
    gemm(s, 1.0f, a, b, 0.0f, c);
    EXPECT_EQ(c[0], 19.0f);
    EXPECT_EQ(c[1], 22.0f);
    EXPECT_EQ(c[2], 43.0f);
    EXPECT_EQ(c[3], 50.0f);
  }
  // Large enough for the libraries' blocked paths; every transpose; also k == 0.
  for (std::int64_t k : {0, 200}) {
    for (int t = 0; t < 4; ++t) {
      GemmShape s{(t & 1) != 0, (t & 2) != 0, 150, 70, k};
      std::vector<float> a(150 * std::max<std::int64_t>(k, 1)), b(70 * std::max<std::int64_t>(k, 1));
      fill_uniform(a.data(), a.size(), -1, 1, 4, 1);
      fill_uniform(b.data(), b.size(), -1, 1, 4, 2);
      std::vector<float> c(150 * 70, NAN);
      gemm(s, 0.5f, a.data(), b.data(), 0.0f, c.data());
      for (float v : c) ASSERT_FALSE(std::isnan(v)) << "k=" << k << " transposes=" << t;
    }
  }
}

TEST_P(GemmBackendTest, StridedBatchedMatchesLoopOfGemms) {
  SKIP_IF_UNAVAILABLE(GetParam());
  BackendScope scope(GetParam());
  const std::int64_t batch = 6, m = 9, n = 11, k = 13;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      GemmShape s{ta == 1, tb == 1, m, n, k};
      std::vector<float> a(batch * m * k), b(batch * k * n), c(batch * m * n, 0.0f), ref = c;
      fill_uniform(a.data(), a.size(), -1, 1, 2, 1);
      fill_uniform(b.data(), b.size(), -1, 1, 2, 2);
      gemm_strided_batched(s, 1.0f, a.data(), m * k, b.data(), k * n, 0.0f, c.data(), m * n,
                           batch);
      for (std::int64_t i = 0; i < batch; ++i) {
        gemm_reference(s, 1.0f, a.data() + i * m * k, b.data() + i * k * n, 0.0f,
                       ref.data() + i * m * n);
      }
      for (std::size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], ref[i], 1e-4f);
    }
  }
}

// Shapes the layers produce (linear.cpp, embedding.cpp's tied head, conv2d.cpp's im2col),
// some with fewer rows than the models so the test stays quick; K and the transposes are the
// models'. Results must not depend on the thread count, nor on being inside a parallel
// region (conv2d and attention call gemm() from one): all are compared bit for bit.
struct ModelShape {
  const char* what;
  GemmShape shape;
  float beta;
};
const ModelShape kModelShapes[] = {
    {"gpt2 attn.qkv fwd (512 rows)", {false, true, 512, 2304, 768}, 0.0f},
    {"gpt2 mlp.fc dX (512 rows)", {false, false, 512, 768, 3072}, 0.0f},
    {"gpt2 mlp.fc dW (accumulate, 1536 of 3072)", {true, false, 1536, 768, 1024}, 1.0f},
    {"gpt2 lm_head fwd (64 rows)", {false, true, 64, 50304, 768}, 0.0f},
    {"gpt2 wte dW from head (1024 of V)", {true, false, 1024, 768, 1024}, 1.0f},
    {"gpt2-tiny lm_head fwd (256 rows)", {false, true, 256, 50304, 128}, 0.0f},
    {"vgg 64x64 3x3 fwd (one image)", {false, false, 64, 1024, 576}, 0.0f},
    {"vgg 512x512 3x3 dX", {true, false, 4608, 16, 512}, 0.0f},
    {"vgg 256x256 3x3 dW", {false, true, 256, 768, 256, 256, 256, 2304}, 1.0f},
    // K = the vocabulary, and a K between OpenBLAS's Q and 2Q: OpenBLAS's threaded driver
    // splits these K sums differently from its one-thread driver (Note [GEMM backends]).
    {"gpt2-tiny head dX (64 rows, K = vocab)", {false, false, 64, 128, 50257}, 0.0f},
    {"K between Q and 2Q", {false, false, 256, 128, 700}, 0.0f},
    // Row-major, no transpose, alpha 1, beta 0, under a few million multiply-adds: what
    // OpenBLAS's AVX-512 "direct" kernel takes, on one thread only.
    {"vgg-tiny 3->16 3x3 fwd (one image)", {false, false, 16, 1024, 27}, 0.0f},
    {"small tied head dX (64 rows, K=600)", {false, false, 64, 16, 600}, 0.0f},
};

// Eigen's bits do not depend on the thread count; a BLAS's may between one thread and more
// (Note [GEMM backends]), so for them the test asks for the same bits from the same thread
// count, and from one thread inside and outside a parallel region.
TEST_P(GemmBackendTest, ModelShapesReproducibleAndAccurate) {
  SKIP_IF_UNAVAILABLE(GetParam());
  BackendScope scope(GetParam());
  const int saved_threads = max_threads();
  for (const ModelShape& ms : kModelShapes) {
    GemmShape s = ms.shape;
    const std::int64_t lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
    const std::int64_t ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
    const std::int64_t ldc = s.ldc ? s.ldc : s.n;
    std::vector<float> a((s.trans_a ? s.k : s.m) * lda), b((s.trans_b ? s.n : s.k) * ldb),
        c0(s.m * ldc);
    fill_uniform(a.data(), a.size(), -1, 1, 5, 1);
    fill_uniform(b.data(), b.size(), -1, 1, 5, 2);
    fill_uniform(c0.data(), c0.size(), -1, 1, 5, 3);
    std::vector<float> one = c0, two = c0, two_again = c0, nested = c0;
    set_num_threads(1);
    gemm(s, 1.0f, a.data(), b.data(), ms.beta, one.data());
    set_num_threads(2);
    gemm(s, 1.0f, a.data(), b.data(), ms.beta, two.data());
    gemm(s, 1.0f, a.data(), b.data(), ms.beta, two_again.data());
    ASSERT_EQ(max_threads(), 2) << ms.what << ": the backend changed sparq's thread count";
    // Inside a two-thread region: thread 0 computes the product, thread 1 another copy.
    std::vector<float> other = c0;
#pragma omp parallel num_threads(2)
    {
      float* out = thread_index() == 0 ? nested.data() : other.data();
      gemm(s, 1.0f, a.data(), b.data(), ms.beta, out);
    }
    set_num_threads(saved_threads);
    ASSERT_EQ(std::memcmp(two.data(), two_again.data(), two.size() * sizeof(float)), 0)
        << ms.what << ": two runs on 2 threads differ";
    if (GetParam() == GemmBackend::kEigen || GetParam() == GemmBackend::kAvx512) {
      ASSERT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
          << ms.what << ": 1 and 2 threads differ";
    }
    ASSERT_EQ(std::memcmp(one.data(), nested.data(), one.size() * sizeof(float)), 0)
        << ms.what << ": inside a parallel region differs";
    ASSERT_EQ(std::memcmp(one.data(), other.data(), one.size() * sizeof(float)), 0)
        << ms.what << ": the second thread's product differs";
    // Accuracy on the first and last rows of op(A) (the full reference would be slow).
    for (std::int64_t row : {std::int64_t{0}, s.m - 1}) {
      GemmShape r = s;
      r.m = 1;
      r.lda = lda, r.ldb = ldb, r.ldc = ldc;
      const float* a_row = s.trans_a ? a.data() + row : a.data() + row * lda;
      std::vector<float> want(c0.begin() + row * ldc, c0.begin() + (row + 1) * ldc);
      gemm_reference(r, 1.0f, a_row, b.data(), ms.beta, want.data());
      for (std::int64_t j = 0; j < s.n; ++j) {
        ASSERT_NEAR(one[row * ldc + j], want[j], 2e-6f * static_cast<float>(s.k))
            << ms.what << " at " << row << "," << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmBackendTest, ::testing::ValuesIn(kAllGemmBackends),
                         [](const auto& info) { return backend_param_name(info.param); });

TEST(GemmBackends, NamesRoundTrip) {
  for (GemmBackend b : kAllGemmBackends) {
    EXPECT_EQ(parse_gemm_backend(gemm_backend_name(b), "test"), b);
  }
  EXPECT_TRUE(gemm_backend_available(GemmBackend::kEigen));
  EXPECT_EQ(gemm_backend_library(GemmBackend::kEigen), "");
}

TEST(GemmBackends, OpenBlasCoresWithAvx512) {
  for (const char* core : {"SkylakeX", "COOPERLAKE", "sapphirerapids", ""}) {
    EXPECT_TRUE(openblas_core_has_avx512(core)) << core;
  }
  for (const char* core : {"Haswell", "Zen", "Sandybridge", "SkylakeX2", "Prescott"}) {
    EXPECT_FALSE(openblas_core_has_avx512(core)) << core;
  }
}

TEST(GemmBackendsDeathTest, UnknownNameIsFatalAndNamesTheKey) {
  EXPECT_DEATH(parse_gemm_backend("mkl", "SPARQ_GEMM"), "SPARQ_GEMM.*mkl");
}

}  // namespace
}  // namespace sparq
