// The dense layers on CUDA (Linear, Residual, activations, Dropout) against their
// CPU twins, ggml style: odd shapes, random inputs, every device output between guard bands,
// forward and backward, and Note [Gradient rule] (outputs and input gradients start as NaN,
// so reading one would show; two backward calls accumulate parameter gradients). Each bound
// is stated with its reason; 0 where both sides do the same IEEE operations in the same
// order. GPU tests skip without a device; GELU's shared math is tested in
// shared_math_test.cpp, which every build runs.
// Embedding: cuda_embedding_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/device_test_util.h"
#include "core/half_math.h"
#include "core/rng.h"
#include "cuda_layer_test_util.h"
#include "layer_test_util.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/gelu_math.h"
#include "layers/linear.h"
#include "layers/residual.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#include "layers/cuda/dropout_cuda.h"
#endif

namespace sparq {
namespace {

#if SPARQ_HAS_CUDA
using testing::GuardedDeviceArray;
#endif
using testing::view;

#if SPARQ_HAS_CUDA

using testing::kGemmBound;
using testing::random_floats;
// A sum over a few dozen rows in another order: ~1e-7 relative in the norm.
constexpr double kReductionBound = 1e-6;
// Device expf/erff/tanhf are within 2 ulp of the host's libm and nvcc fuses multiply-adds:
// a few ulps per element, ~1e-7 relative in the norm. The CPU's float GELU uses
// vector_math.h's tanh/erf (within 3e-7 and 6e-7 absolute), hence its wider bound.
constexpr double kTranscendentalBound = 1e-6;
constexpr double kGeluBound = 3e-6;

using testing::bind_in;
using testing::download;
using testing::expect_close;
using testing::expect_device;
using testing::nans;
using testing::upload;
// GuardedDeviceArray fills device memory on the legacy default stream (cuda_layer_test_util.h).
using testing::uploads_done;

class CudaDense : public testing::CudaLayerTest {};

TEST_F(CudaDense, LinearMatchesTheCpuAndAccumulatesItsGradients) {
  const std::int64_t rows = 37, in = 61, out = 29;
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "without bias");
    Linear cpu_fc("fc", {in, out, bias}), gpu_fc("fc", {in, out, bias});
    ParamStore cpu_store = bind_in(ExecContext::cpu(), cpu_fc);
    ParamStore gpu_store = bind_in(*ctx_, gpu_fc);
    if (bias) {  // initialised to zeros: give the bias add something to do
      const auto b = random_floats(out, 3);
      testing::copy_into(cpu_store.param("fc.bias"), b);
      upload(gpu_store.param("fc.bias"), b);
    }
    auto x = random_floats(rows * in, 1), dy = random_floats(rows * out, 2);
    std::vector<float> y(rows * out), dx(rows * in);
    GuardedDeviceArray<float> x_d(x), dy_d(dy), y_d(nans(y.size())), dx_d(nans(dx.size()));
    uploads_done();
    // x with a leading batch dim, as the models pass it.
    cpu_fc.forward(view(x, {1, rows, in}), view(y, {1, rows, out}));
    gpu_fc.forward(x_d.view({1, rows, in}), y_d.view({1, rows, out}));
    expect_device(y_d, y, kGemmBound, "y");

    std::vector<float> dw_once;
    for (int call = 1; call <= 2; ++call) {
      SCOPED_TRACE("backward call " + std::to_string(call));
      cpu_fc.backward(view(x, {rows, in}), view(dy, {rows, out}), view(dx, {rows, in}));
      gpu_fc.backward(x_d.view({rows, in}), dy_d.view({rows, out}), dx_d.view({rows, in}));
      expect_device(dx_d, dx, kGemmBound, "dx");
      const auto dw = download(gpu_store.grad("fc.weight"));
      expect_close(dw, testing::to_vector(cpu_store.grad("fc.weight")), kGemmBound, "dw");
      // db: column sums in fixed row chunks against the CPU's row-by-row sums.
      if (bias)
        expect_close(download(gpu_store.grad("fc.bias")),
                     testing::to_vector(cpu_store.grad("fc.bias")), kReductionBound, "db");
      if (call == 1) dw_once = dw;
    }
    // beta = 1 adds the same product again: 2g up to the final rounding.
    std::vector<float> twice(dw_once.size());
    for (std::size_t i = 0; i < twice.size(); ++i) twice[i] = 2 * dw_once[i];
    expect_close(download(gpu_store.grad("fc.weight")), twice, 1e-6, "dw after two calls");
    // A first layer passes no dx: the parameter gradients still accumulate.
    cpu_fc.backward(view(x, {rows, in}), view(dy, {rows, out}), Tensor());
    gpu_fc.backward(x_d.view({rows, in}), dy_d.view({rows, out}), Tensor());
    expect_close(download(gpu_store.grad("fc.weight")),
                 testing::to_vector(cpu_store.grad("fc.weight")), kGemmBound, "dw, no dx");
    if (bias)
      expect_close(download(gpu_store.grad("fc.bias")),
                   testing::to_vector(cpu_store.grad("fc.bias")), kReductionBound, "db, no dx");
  }
}

// Note [bf16 GEMM operands]: in a bf16 context Linear's three products take bf16-rounded
// operands: y and dx equal the CPU's f32 products of the rounded x, w and dy up to the
// summation order, and dw accumulates in f32 (two calls give twice one).
TEST_F(CudaDense, LinearInABf16ContextMultipliesRoundedOperands) {
  auto made = ExecContext::create_cuda(0, GemmPrecision::kBF16);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  const std::int64_t rows = 37, in = 61, out = 29;
  Linear cpu_fc("fc", {in, out, true}), gpu_fc("fc", {in, out, true});
  ParamStore cpu_store = bind_in(ExecContext::cpu(), cpu_fc);
  ParamStore gpu_store = bind_in(**made, gpu_fc);
  const auto round = [](std::vector<float> v) {
    for (float& e : v) e = float_of_bf16_bits(bf16_bits_of(e));
    return v;
  };
  // The CPU twin gets the rounded weight and inputs; the device rounds its own.
  const auto w = testing::to_vector(cpu_store.param("fc.weight"));
  testing::copy_into(cpu_store.param("fc.weight"), round(w));
  auto x = random_floats(rows * in, 1), dy = random_floats(rows * out, 2);
  auto x_r = round(x), dy_r = round(dy);
  std::vector<float> y(rows * out), y_exact(rows * out), dx(rows * in);
  GuardedDeviceArray<float> x_d(x), dy_d(dy), y_d(nans(y.size())), dx_d(nans(dx.size()));
  uploads_done();
  cpu_fc.forward(view(x_r, {rows, in}), view(y, {rows, out}));
  gpu_fc.forward(x_d.view({rows, in}), y_d.view({rows, out}));
  expect_device(y_d, y, kGemmBound, "y");
  cpu_fc.backward(view(x_r, {rows, in}), view(dy_r, {rows, out}), view(dx, {rows, in}));
  gpu_fc.backward(x_d.view({rows, in}), dy_d.view({rows, out}), dx_d.view({rows, in}));
  expect_device(dx_d, dx, kGemmBound, "dx");
  const auto dw = download(gpu_store.grad("fc.weight"));
  expect_close(dw, testing::to_vector(cpu_store.grad("fc.weight")), kGemmBound, "dw");
  // Against the unrounded f32 product the rounding shows: far outside the f32 bound. (Two
  // operands rounded to bf16 put about 2e-3 there, an unrounded product about 1e-7.)
  testing::copy_into(cpu_store.param("fc.weight"), w);
  cpu_fc.forward(view(x, {rows, in}), view(y_exact, {rows, out}));
  EXPECT_GT(testing::normalized_error(y_d.download(), y_exact), 20 * kGemmBound);
  gpu_fc.backward(x_d.view({rows, in}), dy_d.view({rows, out}), Tensor());
  std::vector<float> twice(dw.size());
  for (std::size_t i = 0; i < twice.size(); ++i) twice[i] = 2 * dw[i];
  expect_close(download(gpu_store.grad("fc.weight")), twice, 1e-6, "dw after two calls");
}

TEST_F(CudaDense, LinearRefusesAHostTensorNamingIt) {
  Linear fc("h.0.mlp.fc", {4, 3, true});
  ParamStore store = bind_in(*ctx_, fc);
  std::vector<float> x(8), y(6);
  EXPECT_DEATH(fc.forward(view(x, {2, 4}), view(y, {2, 3})),
               "h.0.mlp.fc: x must be a non-empty f32 view on cuda");
}

// One activation on the CPU, then on the device. Backward gets the tensor it reads (the
// forward input for GELU, the output for ReLU and Tanh) from the CPU run, so it is compared
// on its own arithmetic.
template <typename Layer>
void expect_activation_matches_cpu(Layer& layer, const ExecContext& gpu, bool reads_output,
                                   double bound) {
  const std::int64_t n = 10007;
  const auto x = random_floats(n, 51, 3.0), dy = random_floats(n, 52);
  std::vector<float> xs = x, dys = dy, y(n), dx(n);
  layer.bind_context(ExecContext::cpu());
  layer.forward(view(xs, {n}), view(y, {n}));
  std::vector<float>& saved = reads_output ? y : xs;
  layer.backward(view(saved, {n}), view(dys, {n}), view(dx, {n}));

  layer.bind_context(gpu);
  GuardedDeviceArray<float> x_d(x), y_d(nans(n)), saved_d(saved), dy_d(dy), dx_d(nans(n));
  uploads_done();
  layer.forward(x_d.view({n}), y_d.view({n}));
  expect_device(y_d, y, bound, "forward");
  layer.backward(saved_d.view({n}), dy_d.view({n}), dx_d.view({n}));
  expect_device(dx_d, dx, bound, "backward");
  // In place, as the models may call them: y == x forward, dx == dy backward.
  layer.forward(x_d.view({n}), x_d.view({n}));
  expect_device(x_d, y, bound, "forward in place");
  layer.backward(saved_d.view({n}), dy_d.view({n}), dy_d.view({n}));
  expect_device(dy_d, dx, bound, "backward in place");
}

TEST_F(CudaDense, ReluMatchesTheCpuExactly) {
  Relu relu;
  expect_activation_matches_cpu(relu, *ctx_, /*reads_output=*/true, 0.0);  // compare, select
}

TEST_F(CudaDense, GeluMatchesTheCpu) {
  for (GeluKind kind : {GeluKind::kTanh, GeluKind::kErf}) {
    SCOPED_TRACE(kind == GeluKind::kTanh ? "tanh form" : "erf form");
    Gelu gelu(kind);
    expect_activation_matches_cpu(gelu, *ctx_, /*reads_output=*/false, kGeluBound);
  }
}

TEST_F(CudaDense, TanhMatchesTheCpu) {
  Tanh tanh_layer;
  expect_activation_matches_cpu(tanh_layer, *ctx_, /*reads_output=*/true, kTranscendentalBound);
}

TEST_F(CudaDense, ResidualMatchesTheCpuInPlaceToo) {
  const std::int64_t n = 10007;
  auto a = random_floats(n, 61), b = random_floats(n, 62);
  std::vector<float> y(n);
  Residual res("h.0.residual");
  res.forward(view(a, {n}), view(b, {n}), view(y, {n}));
  res.bind_context(*ctx_);
  GuardedDeviceArray<float> a_d(a), b_d(b), y_d(nans(n));
  uploads_done();
  // One IEEE add per element on both sides: the same bits.
  res.forward(a_d.view({n}), b_d.view({n}), y_d.view({n}));
  expect_device(y_d, y, 0.0, "y");
  res.backward(a_d.view({n}), b_d.view({n}), a_d.view({n}));  // dx aliases dy
  expect_device(a_d, y, 0.0, "dx in place");
}

TEST_F(CudaDense, DropoutDrawsTheCpuMaskBitForBit) {
  const std::int64_t n = 10007;  // not a multiple of 4: a partial last Philox block
  const float p = 0.25f;
  const DropoutStep step{11, 0, 5, true};
  auto x = random_floats(n, 71), dy = random_floats(n, 72);
  std::vector<float> ones(n, 1.0f), mask(n), y(n), dx(n);
  Dropout cpu_drop("drop", p, 3), gpu_drop("drop", p, 3);
  cpu_drop.forward(view(ones, {n}), view(mask, {n}), step);
  cpu_drop.forward(view(x, {n}), view(y, {n}), step);
  cpu_drop.backward(view(dy, {n}), view(dx, {n}), step);
  gpu_drop.bind_context(*ctx_);
  GuardedDeviceArray<float> ones_d(ones), x_d(x), dy_d(dy), mask_d(nans(n)), y_d(nans(n)),
      dx_d(nans(n));
  uploads_done();
  gpu_drop.forward(ones_d.view({n}), mask_d.view({n}), step);
  expect_device(mask_d, mask, 0.0, "mask (the scales)");
  gpu_drop.forward(x_d.view({n}), y_d.view({n}), step);
  expect_device(y_d, y, 0.0, "y");
  gpu_drop.backward(dy_d.view({n}), dx_d.view({n}), step);
  expect_device(dx_d, dx, 0.0, "dx");
  gpu_drop.forward(x_d.view({n}), x_d.view({n}), step);  // y aliases x
  expect_device(x_d, y, 0.0, "y in place");
  // Eval mode copies on the device.
  GuardedDeviceArray<float> copy_d(nans(n));
  uploads_done();
  gpu_drop.forward(dy_d.view({n}), copy_d.view({n}), {11, 0, 5, false});
  expect_device(copy_d, dy, 0.0, "eval mode");

  // The kernel on its own, from a position that starts mid-block (lane 3), as the attention
  // kernels' offsets do.
  const DropoutKey key{11, make_stream(RngPurpose::kDropout, 0, 9), (std::uint64_t{7} << 40) + 3};
  std::vector<float> want(n);
  cpu::dropout_apply<float>(key, p, x.data(), want.data(), n);
  GuardedDeviceArray<float> x2_d(x), got_d(nans(n));
  uploads_done();
  cuda::dropout_apply(key, p, x2_d.data(), got_d.data(), n, ctx_->cuda().stream.get());
  expect_device(got_d, want, 0.0, "mid-block start");
}

#endif  // SPARQ_HAS_CUDA

}  // namespace
}  // namespace sparq
