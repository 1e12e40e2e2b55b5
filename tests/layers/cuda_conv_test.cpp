// The vision layers on CUDA against their CPU twins (same layer, same seed, CPU context):
// Conv2d (cuDNN), BatchNorm2d (cuDNN + eval kernels), MaxPool2d and AdaptiveAvgPool2d (sparq's
// kernels). Odd shapes and VGG-like 32x32 ones, forward and backward, every device output
// between guard bands (activations in GuardedDeviceArray; parameter gradients inside a store
// whose gradient buffer is filled with the sentinel everywhere else, including guard tensors
// declared before and after the layer), input gradients pre-filled with NaN (they must be
// overwritten, never read), parameter gradients pre-set and checked after two backward calls
// (they accumulate). GPU tests skip without a device; the window math shared with the CPU is
// tested in shared_math_test.cpp, which every build runs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/device_test_util.h"
#include "layer_test_util.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/pooling.h"

namespace sparq {
namespace {

using testing::random_vec;
using testing::same_bits;
using testing::tie_heavy;
using testing::to_float;

std::vector<float> rand_f(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  return to_float(random_vec(n, seed, scale));
}

#if SPARQ_HAS_CUDA
using testing::GuardedDeviceArray;
using testing::normalized_error;

using testing::download;
using testing::upload;
std::vector<float> nans(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// A CUDA store for one layer between two guard tensors; initialised with the seed of
// testing::bind_layers (the initialisers are seeded per name), so its parameters equal a CPU
// twin's.
template <typename Layer>
ParamStore bind_on_device(Layer& layer, const ExecContext& ctx) {
  ParamStore store;
  store.add({"guard.before", {7}, Init::zeros(), false});
  layer.declare(store);
  store.add({"guard.after", {7}, Init::zeros(), false});
  store.allocate(ctx);
  store.initialize(1);
  layer.bind(store);
  return store;
}

// Sets the layer's gradients to the same random values in both stores and the rest of the
// device gradient buffer (gaps and guard tensors) to the sentinel.
void preset_grads(const std::vector<std::string>& names, ParamStore& cpu, ParamStore& dev) {
  CUDA_CHECK(cudaMemset(dev.grads(), GuardedDeviceArray<float>::kSentinel, dev.flat_numel() * 4));
  std::uint64_t seed = 900;
  for (const std::string& name : names) {
    const auto g = rand_f(static_cast<std::size_t>(cpu.grad(name).numel()), seed++);
    testing::copy_into(cpu.grad(name), g);
    upload(dev.grad(name), g);
  }
}
bool grad_guards_intact(const std::vector<std::string>& names, const ParamStore& dev) {
  std::vector<bool> owned(static_cast<std::size_t>(dev.flat_numel()), false);
  for (const std::string& name : names) {
    const ParamRange r = dev.entry(name).range();
    for (std::int64_t i = r.offset; i < r.end(); ++i) owned[i] = true;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned char> bytes(owned.size() * 4);
  CUDA_CHECK(cudaMemcpy(bytes.data(), dev.grads(), bytes.size(), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!owned[i / 4] && bytes[i] != GuardedDeviceArray<float>::kSentinel) return false;
  }
  return true;
}
void expect_grads_close(const std::vector<std::string>& names, const ParamStore& cpu,
                        const ParamStore& dev, double bound, const std::string& what) {
  for (const std::string& name : names) {
    EXPECT_LT(normalized_error(download(dev.grad(name)), testing::to_vector(cpu.grad(name))), bound)
        << what << " " << name;
  }
  EXPECT_TRUE(grad_guards_intact(names, dev)) << what;
}
#endif

struct ConvCase {
  std::int64_t n, c, k, h, w, r, s, stride, pad, dil;
  bool bias;
};

TEST(CudaConv2d, ForwardAndBackwardMatchTheCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  auto ctx = testing::test_cuda_context();
  ASSERT_TRUE(ctx);
  // f32 FMA on both sides (no TF32), summed in different orders; cuDNN's Winograd / FFT
  // algorithms, if its heuristics pick them, add transform rounding of about 1e-5.
  const double kBound = 2e-4;
  for (const ConvCase& cc : {ConvCase{3, 5, 7, 11, 11, 3, 3, 1, 1, 1, true},
                             ConvCase{2, 16, 32, 32, 32, 3, 3, 1, 1, 1, true},
                             ConvCase{3, 5, 7, 11, 9, 3, 3, 2, 1, 2, false},
                             ConvCase{3, 5, 7, 11, 11, 1, 1, 1, 0, 1, true}}) {
    const Conv2d::Config cfg{cc.c,   cc.k,   cc.r,    cc.s, cc.stride,
                             cc.pad, cc.dil, cc.bias, cc.h, cc.w};
    Conv2d host("conv", cfg), dev("conv", cfg);
    ParamStore host_store = testing::bind_layers(host);
    ParamStore dev_store = bind_on_device(dev, *ctx);
    const Shape xs{cc.n, cc.c, cc.h, cc.w}, ys = host.output_shape(cc.n);
    const std::string what = "conv " + xs.str() + " -> " + ys.str();
    auto x = rand_f(xs.numel(), 11), dy = rand_f(ys.numel(), 12);
    std::vector<float> y(ys.numel()), dx(xs.numel());
    GuardedDeviceArray<float> x_d(x), dy_d(dy), y_d(nans(y.size())), dx_d(nans(dx.size()));

    host.forward(testing::view(x, xs), testing::view(y, ys));
    dev.forward(x_d.view(xs), y_d.view(ys));
    EXPECT_LT(normalized_error(y_d.download(), y), kBound) << what << " y";
    EXPECT_TRUE(y_d.guards_intact()) << what << " y";

    const auto names = host.param_names();
    preset_grads(names, host_store, dev_store);
    for (int call = 1; call <= 2; ++call) {  // the second call accumulates onto the first
      host.backward(testing::view(x, xs), testing::view(dy, ys), testing::view(dx, xs));
      dev.backward(x_d.view(xs), dy_d.view(ys), dx_d.view(xs));
      EXPECT_LT(normalized_error(dx_d.download(), dx), kBound) << what << " dx, call " << call;
      EXPECT_TRUE(dx_d.guards_intact()) << what << " dx";
      expect_grads_close(names, host_store, dev_store, kBound,
                         what + " call " + std::to_string(call));
    }
    // Without an input gradient (the first layer) only dW and db accumulate.
    dev.backward(x_d.view(xs), dy_d.view(ys), Tensor());
    host.backward(testing::view(x, xs), testing::view(dy, ys), Tensor());
    expect_grads_close(names, host_store, dev_store, kBound, what + " without dx");
  }
#endif
}

// Two fresh layers (fresh plans, fresh algorithm choice) on the same inputs give the same bits:
// what a resumed run relies on. A batch of 8 64-channel maps is where cuDNN's atomics-based
// backward-filter algorithms would otherwise be candidates.
TEST(CudaConv2d, DeterministicSettingGivesIdenticalRuns) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  auto ctx = testing::test_cuda_context();
  ASSERT_TRUE(ctx);
  const Conv2d::Config cfg{64, 64, 3, 3, 1, 1, 1, true, 16, 16, true};
  const Shape xs{8, 64, 16, 16};
  const auto x = rand_f(xs.numel(), 21), dy = rand_f(xs.numel(), 22);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    Conv2d conv("conv", cfg);
    ParamStore store = bind_on_device(conv, *ctx);
    GuardedDeviceArray<float> x_d(x), dy_d(dy), y_d(x.size()), dx_d(x.size());
    for (int step = 0; step < 2; ++step) {
      conv.forward(x_d.view(xs), y_d.view(xs));
      conv.backward(x_d.view(xs), dy_d.view(xs), dx_d.view(xs));
    }
    std::vector<float> all = y_d.download();
    for (const auto& part : {dx_d.download(), download(store.grad("conv.weight")),
                             download(store.grad("conv.bias"))}) {
      all.insert(all.end(), part.begin(), part.end());
    }
    runs.push_back(std::move(all));
  }
  EXPECT_TRUE(same_bits(runs[0], runs[1]));
#endif
}

TEST(CudaBatchNorm2d, TrainingAndEvalMatchTheCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  auto ctx = testing::test_cuda_context();
  ASSERT_TRUE(ctx);
  // cuDNN's f32 statistics against the CPU's double ones: a few ulps in y and the running
  // statistics; dx subtracts two means from dy (cancellation), and the CPU sums each
  // channel's gradient sequentially in f32 over up to 2048 values.
  const double kForward = 1e-5, kBackward = 1e-4;
  for (const Shape& xs : {Shape{3, 5, 11, 11}, Shape{2, 16, 32, 32}, Shape{8, 64, 2, 2}}) {
    const std::int64_t c = xs[1];
    BatchNorm2d host("bn", {c, 1e-5f, 0.1f}), dev("bn", {c, 1e-5f, 0.1f});
    ParamStore host_store = testing::bind_layers(host);
    ParamStore dev_store = bind_on_device(dev, *ctx);
    EXPECT_EQ(dev.running_mean().device(), Device::kCUDA);
    EXPECT_EQ(dev.running_var().device(), Device::kCUDA);
    std::uint64_t seed = 31;
    for (const char* p : {"bn.weight", "bn.bias"}) {
      const auto v = rand_f(c, seed++);
      testing::copy_into(host_store.param(p), v);
      upload(dev_store.param(p), v);
    }
    auto dy = rand_f(xs.numel(), 35);
    GuardedDeviceArray<float> dy_d(dy);
    const auto names = host.param_names();
    for (const bool training : {true, false}) {
      const std::string what = std::string(training ? "train " : "eval ") + xs.str();
      if (!training) {  // running statistics of a trained layer, set alike on both sides
        auto mean = rand_f(c, 33), var = rand_f(c, 34);
        for (float& v : var) v = 0.5f + std::fabs(v);
        testing::copy_into(host.running_mean(), mean);
        testing::copy_into(host.running_var(), var);
        upload(dev.running_mean(), mean);
        upload(dev.running_var(), var);
      }
      std::vector<float> y(xs.numel()), dx(xs.numel());
      GuardedDeviceArray<float> y_d(nans(y.size())), dx_d(nans(dx.size()));
      for (int step = 0; step < 2; ++step) {  // training: the running statistics move twice
        auto x = rand_f(xs.numel(), 40 + step, 2.0);
        for (float& v : x) v += 3.0f;  // an offset, so the variance convention matters
        GuardedDeviceArray<float> x_d(x);
        const auto mean_before = testing::to_vector(host.running_mean());
        const auto var_before = testing::to_vector(host.running_var());
        host.forward(testing::view(x, xs), testing::view(y, xs), training);
        dev.forward(x_d.view(xs), y_d.view(xs), training);
        EXPECT_LT(normalized_error(y_d.download(), y), kForward) << what << " y";
        EXPECT_TRUE(y_d.guards_intact()) << what;
        const auto mean = download(dev.running_mean()), var = download(dev.running_var());
        EXPECT_LT(normalized_error(mean, testing::to_vector(host.running_mean())), kForward)
            << what << " running mean";
        EXPECT_LT(normalized_error(var, testing::to_vector(host.running_var())), kForward)
            << what << " running var";
        if (!training) {
          EXPECT_TRUE(same_bits(mean, mean_before) && same_bits(var, var_before)) << what;
        }
        if (step == 0) continue;
        preset_grads(names, host_store, dev_store);
        for (int call = 1; call <= 2; ++call) {
          host.backward(testing::view(x, xs), testing::view(dy, xs), testing::view(dx, xs));
          dev.backward(x_d.view(xs), dy_d.view(xs), dx_d.view(xs));
          EXPECT_LT(normalized_error(dx_d.download(), dx), kBackward) << what << " dx " << call;
          EXPECT_TRUE(dx_d.guards_intact()) << what;
          expect_grads_close(names, host_store, dev_store, kBackward, what);
        }
      }
    }
  }
#endif
}

struct PoolCase {
  std::int64_t n, c, h, w, kernel, stride, padding;
};

TEST(CudaMaxPool2d, ForwardAndBackwardGiveTheCpuBitsWithTies) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  auto ctx = testing::test_cuda_context();
  ASSERT_TRUE(ctx);
  // Bound 0: the same window scan (ties to the first maximum) and the same summation order.
  for (const PoolCase& pc : {PoolCase{3, 5, 11, 11, 3, 2, 1}, PoolCase{4, 16, 32, 32, 2, 2, 0},
                             PoolCase{3, 5, 9, 7, 3, 1, 1}, PoolCase{2, 3, 7, 8, 2, 2, 1}}) {
    const MaxPool2d::Config cfg{pc.c, pc.h, pc.w, pc.kernel, pc.stride, pc.padding, pc.n};
    MaxPool2d host("pool", cfg), dev("pool", cfg);
    dev.bind_context(*ctx);
    const Shape xs{pc.n, pc.c, pc.h, pc.w}, ys = host.output_shape(pc.n);
    const std::string what = "max pool " + xs.str() + " k" + std::to_string(pc.kernel);
    auto x = tie_heavy(xs.numel(), 51), dy = rand_f(ys.numel(), 52);
    x[x.size() / 3] = std::numeric_limits<float>::quiet_NaN();  // a NaN wins its windows
    std::vector<float> y(ys.numel()), dx(xs.numel());
    GuardedDeviceArray<float> x_d(x), dy_d(dy), y_d(nans(y.size())), dx_d(nans(dx.size()));
    host.forward(testing::view(x, xs), testing::view(y, ys));
    dev.forward(x_d.view(xs), y_d.view(ys));
    EXPECT_TRUE(same_bits(y_d.download(), y)) << what << " y";
    host.backward(testing::view(dy, ys), testing::view(dx, xs));
    dev.backward(dy_d.view(ys), dx_d.view(xs));
    EXPECT_TRUE(same_bits(dx_d.download(), dx)) << what << " dx";
    EXPECT_TRUE(y_d.guards_intact() && dx_d.guards_intact()) << what;
  }
#endif
}

TEST(CudaAdaptiveAvgPool2d, ForwardAndBackwardGiveTheCpuBits) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  auto ctx = testing::test_cuda_context();
  ASSERT_TRUE(ctx);
  // Bound 0: each cell sums its window in the CPU's order and divides by the same area.
  for (const Shape& out : {Shape{3, 5, 3, 2}, Shape{3, 5, 1, 1}, Shape{3, 5, 4, 5}}) {
    const Shape xs{3, 5, 11, 7};
    AdaptiveAvgPool2d host("avg", out[2], out[3]), dev("avg", out[2], out[3]);
    dev.bind_context(*ctx);
    const std::string what = "avg pool -> " + out.str();
    auto x = rand_f(xs.numel(), 61), dy = rand_f(out.numel(), 62);
    std::vector<float> y(out.numel()), dx(xs.numel());
    GuardedDeviceArray<float> x_d(x), dy_d(dy), y_d(nans(y.size())), dx_d(nans(dx.size()));
    host.forward(testing::view(x, xs), testing::view(y, out));
    dev.forward(x_d.view(xs), y_d.view(out));
    EXPECT_TRUE(same_bits(y_d.download(), y)) << what << " y";
    host.backward(testing::view(dy, out), testing::view(dx, xs));
    dev.backward(dy_d.view(out), dx_d.view(xs));
    EXPECT_TRUE(same_bits(dx_d.download(), dx)) << what << " dx";
    EXPECT_TRUE(y_d.guards_intact() && dx_d.guards_intact()) << what;
  }
#endif
}

}  // namespace
}  // namespace sparq
