// The optimizer launchers (optim/cuda/*_cuda.h) on guarded device arrays: every output and
// every state buffer sits between guard bands, inputs have odd sizes, and the device result is
// compared with the same update_math.h functions run on the host, element by element.
//
// Bounds: the per-element expressions are shared, so the only admissible difference is the
// compilers' choice of fused multiply-adds (g++ -march=native and nvcc --fmad=true may fuse
// different products of one expression), about an ulp per operation: 1e-6 normalized error
// (the tests print the ulp distance; 0 means bit-exact). The global norm is a double sum in
// another order than the host's: relative 1e-10 (n * 2^-53 is 1e-10 for n = 1e6 even in the
// worst case, far above the typical error). The clip scale from a given norm is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/device_test_util.h"
#include "core/ops.h"
#include "core/rng.h"
#include "optim/cuda_optim_test_util.h"
#include "optim/update_math.h"

#if SPARQ_HAS_CUDA
#include "optim/cuda/global_norm_cuda.h"
#include "optim/cuda/optimizer_cuda.h"
#endif

namespace sparq::optim {
namespace {

using testing::GuardedDeviceArray;

constexpr double kUpdateBound = 1e-6;  // shared math; fused multiply-adds may differ (above)
constexpr double kKernelNormBound = 1e-10;  // double sums in two orders

std::vector<float> uniform(std::size_t n, float lo, float hi, std::uint64_t stream) {
  std::vector<float> v(n);
  fill_uniform(v.data(), n, lo, hi, 97, stream);
  return v;
}

// One flag per 64-float chunk, mixed.
std::vector<std::uint8_t> random_decay(std::size_t chunks) {
  std::vector<std::uint8_t> d(chunks);
  for (std::size_t c = 0; c < chunks; ++c) d[c] = random_u32_at(5, 1, c) % 2;
  return d;
}

#if SPARQ_HAS_CUDA
constexpr std::int64_t kChunk = cuda::kDecayChunkFloats;
#endif

TEST(CudaGlobalNorm, MatchesTheHostSumAndIsDeterministic) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  // Sizes below one block, across the grid once, and several grid strides.
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{262145},
                              std::size_t{1000003}}) {
    const std::vector<float> x = uniform(n, -2.0f, 2.0f, n);
    GuardedDeviceArray<float> dx(n);
    dx.upload(x);
    GuardedDeviceArray<double> partials(cuda::kNormBlocks), norm(1), norm_again(1);
    GuardedDeviceArray<float> scale(1);
    const double want = std::sqrt(ops::sum_squares(x.data(), n));
    const double max_norm = want / 2;  // binds (unless n == 0)
    cuda::global_norm(dx.data(), static_cast<std::int64_t>(n), max_norm, partials.data(),
                      norm.data(), scale.data(), nullptr);
    const double got = norm.download()[0];
    EXPECT_LE(std::fabs(got - want), kKernelNormBound * want) << n;
    EXPECT_EQ(scale.download()[0], clip_scale(got, max_norm)) << n;  // same double expression
    // Same input, same bits: the partition and the summation order are fixed.
    cuda::global_norm(dx.data(), static_cast<std::int64_t>(n), max_norm, partials.data(),
                      norm_again.data(), scale.data(), nullptr);
    EXPECT_EQ(norm_again.download()[0], got) << n;
    EXPECT_EQ(dx.download(), x);
    for (bool ok : {dx.guards_intact(), partials.guards_intact(), norm.guards_intact(),
                    norm_again.guards_intact(), scale.guards_intact()}) {
      EXPECT_TRUE(ok) << n;
    }
  }
  // Measuring only (max_norm <= 0): the scale is 1.
  GuardedDeviceArray<float> dx(uniform(1000, 1.0f, 2.0f, 3));
  GuardedDeviceArray<double> partials(cuda::kNormBlocks), norm(1);
  GuardedDeviceArray<float> scale(1);
  cuda::global_norm(dx.data(), 1000, 0.0, partials.data(), norm.data(), scale.data(), nullptr);
  EXPECT_EQ(scale.download()[0], 1.0f);
#endif
}

// Adam's per-step scalars for the kernel tests (any values do: host and device share them).
AdamScalars example_adam_scalars(bool decoupled) {
  AdamScalars s;
  s.lr = 0.01f;
  s.beta1 = 0.9f;
  s.beta2 = 0.95f;
  s.one_minus_beta1 = 0.1f;  // set with the betas (adam_scalars does: AdamScalars)
  s.one_minus_beta2 = 0.05f;
  s.step_size = 0.012f;
  s.inv_sqrt_bc2 = 3.1f;
  s.decoupled = decoupled;
  return s;
}

TEST(CudaAdamKernel, MatchesTheSharedMathOnTheHost) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  const std::size_t chunks = 157, n = chunks * kChunk;
  const std::vector<std::uint8_t> decay = random_decay(chunks);
  const std::vector<float> p0 = uniform(n, -1, 1, 1), g = uniform(n, -0.5f, 0.5f, 2),
                           m0 = uniform(n, -0.1f, 0.1f, 3), v0 = uniform(n, 0.0f, 0.01f, 4);
  const float clip = 0.73f, wd = 0.05f;
  for (int variant = 0; variant < 4; ++variant) {
    const bool decoupled = variant % 2 == 1, frozen = variant >= 2;
    const AdamScalars s = example_adam_scalars(decoupled);
    // The host clips as clip_grad_norm does, in place, in another function (so no product
    // of the scaling can be fused into the update), then steps.
    std::vector<float> p = p0, m = m0, v = v0, clipped = g;
    ops::scale(clipped.data(), n, clip);
    for (std::size_t i = 0; i < n; ++i) {
      const float w = decay[i / kChunk] ? wd : 0.0f;
      if (frozen) {
        adam_frozen_update(clipped[i], w, s, p[i], v[i]);
      } else {
        adam_update(clipped[i], w, s, p[i], m[i], v[i]);
      }
    }
    GuardedDeviceArray<float> dp(p0), dg(g), dm(m0), dv(v0), dscale(std::vector<float>{clip});
    GuardedDeviceArray<std::uint8_t> ddecay(decay);
    cuda::adam_step(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(),
                    static_cast<std::int64_t>(n), s, frozen, wd, dscale.data(),
                    /*guard_norm=*/nullptr, nullptr);
    const std::string what = std::string(decoupled ? "adamw" : "adam") + (frozen ? " frozen" : "");
    testing::expect_close(dp.download(), p, kUpdateBound, what + " params");
    testing::expect_close(dm.download(), m, kUpdateBound, what + " m");
    if (frozen) {
      EXPECT_EQ(dv.download(), v0) << "the frozen variance is only read";
    }
    testing::expect_close(dv.download(), v, kUpdateBound, what + " v");
    EXPECT_EQ(dg.download(), g) << "the clip scale is applied as read, never written back";
    for (bool ok : {dp.guards_intact(), dg.guards_intact(), dm.guards_intact(),
                    dv.guards_intact(), dscale.guards_intact(), ddecay.guards_intact()}) {
      EXPECT_TRUE(ok) << what;
    }
  }
#endif
}

TEST(CudaSgdKernel, MatchesTheSharedMathOnTheHost) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  const std::size_t chunks = 211, n = chunks * kChunk;
  const std::vector<std::uint8_t> decay = random_decay(chunks);
  const std::vector<float> p0 = uniform(n, -1, 1, 5), g = uniform(n, -0.5f, 0.5f, 6),
                           b0 = uniform(n, -0.2f, 0.2f, 7);
  const float wd = 0.01f;
  // 0: no momentum; 1: first momentum step; 2: dampened momentum; 3: nesterov.
  for (int variant = 0; variant < 4; ++variant) {
    SgdScalars s;
    s.lr = 0.1f;
    s.momentum = variant == 0 ? 0.0f : 0.9f;
    s.damp = variant == 2 ? 0.8f : 1.0f;
    s.first = variant == 1;
    s.nesterov = variant == 3;
    std::vector<float> p = p0, b = b0;
    for (std::size_t i = 0; i < n; ++i) {
      const float w = decay[i / kChunk] ? wd : 0.0f;
      if (variant == 0) {
        sgd_plain_update(g[i], w, s, p[i]);
      } else {
        sgd_momentum_update(g[i], w, s, p[i], b[i]);
      }
    }
    GuardedDeviceArray<float> dp(p0), dg(g), db(b0);
    GuardedDeviceArray<std::uint8_t> ddecay(decay);
    cuda::sgd_step(dp.data(), dg.data(), variant == 0 ? nullptr : db.data(), ddecay.data(),
                   static_cast<std::int64_t>(n), s, wd, nullptr, /*guard_norm=*/nullptr, nullptr);
    const std::string what = "sgd variant " + std::to_string(variant);
    testing::expect_close(dp.download(), p, kUpdateBound, what + " params");
    testing::expect_close(db.download(), b, kUpdateBound, what + " momentum");
    EXPECT_EQ(dg.download(), g);
    for (bool ok : {dp.guards_intact(), dg.guards_intact(), db.guards_intact(),
                    ddecay.guards_intact()}) {
      EXPECT_TRUE(ok) << what;
    }
  }
#endif
}

TEST(CudaAdamKernel, MomentumIntoGradsTouchesOnlyItsRange) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  const std::size_t chunks = 45, n = chunks * kChunk;
  const std::int64_t begin = 3 * kChunk, end = static_cast<std::int64_t>(n) - 100;
  const std::vector<std::uint8_t> decay = random_decay(chunks);
  const std::vector<float> p = uniform(n, -1, 1, 8), g0 = uniform(n, -0.5f, 0.5f, 9),
                           m0 = uniform(n, -0.1f, 0.1f, 10);
  std::vector<float> g = g0, m = m0;
  for (std::int64_t i = begin; i < end; ++i) {
    const float w = decay[static_cast<std::size_t>(i / kChunk)] ? 0.02f : 0.0f;
    g[i] = adam_local_momentum(g[i], p[i], w, 0.9f, 0.1f, m[i]);
  }
  GuardedDeviceArray<float> dp(p), dg(g0), dm(m0);
  GuardedDeviceArray<std::uint8_t> ddecay(decay);
  cuda::adam_momentum_into_grads(dg.data(), dp.data(), dm.data(), ddecay.data(), begin, end, 0.02f,
                                 0.9f, 0.1f, nullptr);
  const std::vector<float> got = dg.download();
  testing::expect_close(got, g, kUpdateBound, "momentum into grads");
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
    if (i < begin || i >= end) {
      ASSERT_EQ(got[i], g0[i]) << i;  // outside the range: untouched
    }
  }
  EXPECT_TRUE(dg.guards_intact());
  EXPECT_EQ(dp.download(), p);
  testing::expect_close(dm.download(), m, kUpdateBound, "local momentum advanced");
#endif
}

// communicate: update's kernels: the local directions (Adam, SGD with and without momentum)
// write only their range, and advance only that range's state; the averaged update applies
// AdamW's decoupled decay by the table and the clip scale as read.
TEST(CudaUpdateModeKernels, DirectionsAndTheAveragedUpdateMatchTheSharedMath) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  const std::size_t chunks = 77, n = chunks * kChunk;
  const std::int64_t begin = 2 * kChunk + 5, end = static_cast<std::int64_t>(n) - 71;
  const std::vector<std::uint8_t> decay = random_decay(chunks);
  const std::vector<float> p = uniform(n, -1, 1, 15), g0 = uniform(n, -0.5f, 0.5f, 16),
                           m0 = uniform(n, -0.1f, 0.1f, 17), v0 = uniform(n, 0.0f, 0.01f, 18);
  const auto wd_at = [&](std::int64_t i, float wd) {
    return decay[static_cast<std::size_t>(i / kChunk)] ? wd : 0.0f;
  };
  const auto expect_outside_untouched = [&](const std::vector<float>& got,
                                            const std::vector<float>& before,
                                            const std::string& what) {
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
      if (i < begin || i >= end) {
        ASSERT_EQ(got[i], before[i]) << what << " at " << i;
      }
    }
  };
  {
    AdamScalars s = example_adam_scalars(false);
    s.lr = 1.0f;  // the direction is built for lr = 1 (adam.cpp)
    std::vector<float> g = g0, m = m0, v = v0;
    for (std::int64_t i = begin; i < end; ++i) {
      g[i] = adam_local_direction(g[i], p[i], wd_at(i, 0.03f), s, m[i], v[i]);
    }
    GuardedDeviceArray<float> dp(p), dg(g0), dm(m0), dv(v0);
    GuardedDeviceArray<std::uint8_t> ddecay(decay);
    cuda::adam_direction_into_grads(dg.data(), dp.data(), dm.data(), dv.data(), ddecay.data(),
                                    begin, end, 0.03f, s, nullptr);
    const std::vector<float> got_g = dg.download(), got_m = dm.download(), got_v = dv.download();
    testing::expect_close(got_g, g, kUpdateBound, "adam direction");
    testing::expect_close(got_m, m, kUpdateBound, "adam direction m");
    testing::expect_close(got_v, v, kUpdateBound, "adam direction v");
    expect_outside_untouched(got_g, g0, "adam direction");
    expect_outside_untouched(got_m, m0, "adam direction m");
    expect_outside_untouched(got_v, v0, "adam direction v");
    EXPECT_EQ(dp.download(), p);
    EXPECT_TRUE(dg.guards_intact() && dm.guards_intact() && dv.guards_intact() &&
                dp.guards_intact() && ddecay.guards_intact());
  }
  for (const bool with_momentum : {false, true}) {
    SgdScalars s;
    s.lr = 1.0f;
    s.momentum = with_momentum ? 0.9f : 0.0f;
    s.damp = 0.8f;
    s.first = false;
    std::vector<float> g = g0, b = m0;
    for (std::int64_t i = begin; i < end; ++i) {
      g[i] = sgd_local_direction(g[i], p[i], wd_at(i, 0.01f), s, b[i]);
    }
    GuardedDeviceArray<float> dp(p), dg(g0), db(m0);
    GuardedDeviceArray<std::uint8_t> ddecay(decay);
    cuda::sgd_direction_into_grads(dg.data(), dp.data(), with_momentum ? db.data() : nullptr,
                                   ddecay.data(), begin, end, 0.01f, s, nullptr);
    const std::string what = with_momentum ? "sgd direction, momentum" : "sgd direction";
    const std::vector<float> got_g = dg.download(), got_b = db.download();
    testing::expect_close(got_g, g, kUpdateBound, what);
    testing::expect_close(got_b, b, kUpdateBound, what + " buffer");
    expect_outside_untouched(got_g, g0, what);
    expect_outside_untouched(got_b, m0, what + " buffer");
    EXPECT_TRUE(dg.guards_intact() && db.guards_intact());
  }
  // The averaged update, clipped by 0.61 and unclipped, with decoupled decay and without.
  for (const float clip : {0.61f, 1.0f}) {
    for (const float wd : {0.0f, 0.05f}) {
      std::vector<float> want = p, scaled = g0;
      if (clip != 1.0f) ops::scale(scaled.data(), n, clip);  // clip_grad_norm's in-place rule
      for (std::size_t i = 0; i < n; ++i) {
        apply_averaged_update(scaled[i], decay[i / kChunk] ? wd : 0.0f, 0.02f, want[i]);
      }
      GuardedDeviceArray<float> dp(p), dg(g0), dscale(std::vector<float>{clip});
      GuardedDeviceArray<std::uint8_t> ddecay(decay);
      cuda::apply_update_step(dp.data(), dg.data(), ddecay.data(), static_cast<std::int64_t>(n), wd,
                              0.02f, clip != 1.0f ? dscale.data() : nullptr,
                              /*guard_norm=*/nullptr, nullptr);
      testing::expect_close(
          dp.download(), want, kUpdateBound,
          "averaged update, clip " + std::to_string(clip) + ", wd " + std::to_string(wd));
      EXPECT_EQ(dg.download(), g0);
      EXPECT_TRUE(dp.guards_intact() && dg.guards_intact() && ddecay.guards_intact());
    }
  }
#endif
}

// A guarded step (the host does not wait for the norm before enqueueing it) leaves the
// parameters and the state as they were when the aggregate's norm is not finite, and is the
// plain step when it is.
TEST(CudaOptimizerKernels, AGuardedStepSkipsOnANonFiniteNorm) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  const std::size_t chunks = 9, n = chunks * kChunk;
  const std::vector<std::uint8_t> decay = random_decay(chunks);
  const std::vector<float> p0 = uniform(n, -1, 1, 11), g = uniform(n, -0.5f, 0.5f, 12),
                           m0 = uniform(n, -0.1f, 0.1f, 13), v0 = uniform(n, 0.0f, 0.01f, 14);
  const AdamScalars a = example_adam_scalars(/*decoupled=*/false);
  SgdScalars sg;
  sg.lr = 0.1f;
  sg.momentum = 0.9f;
  for (double norm : {1.5, std::nan(""), static_cast<double>(INFINITY)}) {
    GuardedDeviceArray<double> guard(std::vector<double>{norm});
    GuardedDeviceArray<float> dp(p0), dg(g), dm(m0), dv(v0), rp(p0), rm(m0), rv(v0);
    GuardedDeviceArray<std::uint8_t> ddecay(decay);
    cuda::adam_step(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(),
                    static_cast<std::int64_t>(n), a, false, 0.01f, nullptr, guard.data(), nullptr);
    cuda::adam_step(rp.data(), dg.data(), rm.data(), rv.data(), ddecay.data(),
                    static_cast<std::int64_t>(n), a, false, 0.01f, nullptr, nullptr, nullptr);
    const bool finite = std::isfinite(norm);
    EXPECT_EQ(dp.download(), finite ? rp.download() : p0) << "adam params, norm " << norm;
    EXPECT_EQ(dm.download(), finite ? rm.download() : m0) << "adam m, norm " << norm;
    EXPECT_EQ(dv.download(), finite ? rv.download() : v0) << "adam v, norm " << norm;
    GuardedDeviceArray<float> sp(p0), sb(m0), tp(p0), tb(m0);
    cuda::sgd_step(sp.data(), dg.data(), sb.data(), ddecay.data(), static_cast<std::int64_t>(n), sg,
                   0.0f, nullptr, guard.data(), nullptr);
    cuda::sgd_step(tp.data(), dg.data(), tb.data(), ddecay.data(), static_cast<std::int64_t>(n), sg,
                   0.0f, nullptr, nullptr, nullptr);
    EXPECT_EQ(sp.download(), finite ? tp.download() : p0) << "sgd params, norm " << norm;
    EXPECT_EQ(sb.download(), finite ? tb.download() : m0) << "sgd momentum, norm " << norm;
    GuardedDeviceArray<float> up(p0), uq(p0);
    cuda::apply_update_step(up.data(), dg.data(), ddecay.data(), static_cast<std::int64_t>(n),
                            0.01f, 0.1f, nullptr, guard.data(), nullptr);
    cuda::apply_update_step(uq.data(), dg.data(), ddecay.data(), static_cast<std::int64_t>(n),
                            0.01f, 0.1f, nullptr, nullptr, nullptr);
    EXPECT_EQ(up.download(), finite ? uq.download() : p0) << "update params, norm " << norm;
    EXPECT_TRUE(up.guards_intact());
    EXPECT_TRUE(dp.guards_intact() && dm.guards_intact() && dv.guards_intact() &&
                sp.guards_intact() && sb.guards_intact());
  }
#endif
}

}  // namespace
}  // namespace sparq::optim
