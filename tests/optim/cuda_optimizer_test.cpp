// The optimizers on a CUDA ParamStore against the same optimizers on a CPU store: the same
// initial weights (ParamStore::initialize runs on the host), the same gradients every step,
// five steps of SGD (momentum, dampening, Nesterov, weight decay) and of Adam/AdamW (also with
// freeze_steps = 2), per-range before_communication, and global-norm clipping that binds on
// some steps and not on others. Tensors have odd sizes, with and without weight decay.
//
// Bounds (the guards around state buffers are checked on the launchers, in
// cuda_optimizer_kernels_test.cpp, where every buffer is a guarded array):
//   norm:          relative 1e-10: both sum squares in double, in different orders.
//   params, state: normalized error 1e-6: the per-element math is shared (update_math.h), so
//                  they can differ only where the compilers fuse different multiply-adds, or
//                  where the two norms' last bits move the f32 clip scale by an ulp; either is
//                  about an ulp per step. The ulp distance is printed: 0 is bit-exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/device_test_util.h"
#include "core/rng.h"
#include "optim/clip.h"
#include "optim/cuda_optim_test_util.h"
#include "optim/optimizer.h"

namespace sparq::optim {
namespace {

constexpr int kSteps = 5;
constexpr double kNormBound = 1e-10;   // double sums in two orders
constexpr double kStateBound = 1e-6;   // shared math (see the top of the file)
constexpr double kMaxNorm = 60.0;      // the norms below run from about 40 to 160

ParamStore make_store(const ExecContext& ctx) {
  ParamStore s;
  s.add({"embed", {129, 7}, Init::normal(0.5f), true});
  s.add({"w1", {37, 29}, Init::uniform(-1.0f, 1.0f), true});
  s.add({"b1", {29}, Init::normal(0.1f), false});
  s.add({"gain", {1}, Init::ones(), false});
  s.add({"big", {100003}, Init::normal(0.02f), true});
  s.add({"ln", {131}, Init::uniform(0.5f, 1.5f), false});
  s.add({"w2", {5, 3, 11}, Init::normal(1.0f), true});
  s.allocate(ctx);
  s.initialize(11);
  return s;
}

// Step `step`'s gradients in the flat layout (zero in the padding), growing with the step so
// that clipping at kMaxNorm binds from step 1 on but not at step 0.
std::vector<float> grads_for(const ParamStore& s, int step) {
  std::vector<float> g(static_cast<std::size_t>(s.flat_numel()), 0.0f);
  for (std::size_t t = 0; t < s.entries().size(); ++t) {
    const ParamEntry& e = s.entries()[t];
    fill_normal(g.data() + e.offset, static_cast<std::size_t>(e.numel), 0.0f,
                0.12f * (1.0f + step) * (1.0f + 0.2f * (t % 3)), 21, 100 * step + t);
  }
  return g;
}

std::vector<float> read_all(const float* data, std::int64_t n, Device device) {
#if SPARQ_HAS_CUDA
  if (device == Device::kCUDA) return testing::download_all(data, n);
#endif
  return std::vector<float>(data, data + n);
}

void write_grads(const ParamStore& s, const std::vector<float>& g) {
#if SPARQ_HAS_CUDA
  if (s.device() == Device::kCUDA) return testing::upload_all(s.grads(), g);
#endif
  std::memcpy(s.grads(), g.data(), g.size() * sizeof(float));
}

struct Trajectory {
  std::vector<double> norms;
  std::vector<float> params;
  std::vector<float> grads;  // after the last step
  std::vector<std::string> state_names;
  std::vector<std::vector<float>> state;
};

// `clip_every`: clip before every step; otherwise only before step 0 (the later steps must
// then use their gradients unscaled, not a stale scale).
// Clips at every step, or only at the steps in `clip_steps` when it is given.
// `local_clip`: clip each step's gradient in place BEFORE before_communication, as the
// trainer does with optim.clip_scope: local (the modes that send momentum or updates), then
// only measure the "aggregate"; the norms recorded are the local ones.
Trajectory run(const OptimConfig& config, const ExecContext& ctx,
               const std::vector<int>* clip_steps = nullptr, bool local_clip = false) {
  ParamStore s = make_store(ctx);
  auto made = make_optimizer(config, s);
  EXPECT_TRUE(made.is_ok()) << made.status().message();
  Optimizer& opt = **made;
  Trajectory r;
  for (int step = 0; step < kSteps; ++step) {
    write_grads(s, grads_for(s, step));
    if (local_clip) r.norms.push_back(opt.clip_local_gradient(kMaxNorm));
    // Range by range, as the WFBP scheduler's callback does it, in backward order.
    for (auto e = s.entries().rbegin(); e != s.entries().rend(); ++e) {
      opt.before_communication(step, e->range());
    }
    const bool clip = clip_steps == nullptr ||
                      std::find(clip_steps->begin(), clip_steps->end(), step) != clip_steps->end();
    if (local_clip) {
      opt.clip_grad_norm(0.0);  // measures the aggregate only
    } else if (clip) {
      r.norms.push_back(opt.clip_grad_norm(kMaxNorm));
    }
    opt.step(0.01 * (1.0 + 0.5 * step));
  }
  r.params = read_all(s.params(), s.flat_numel(), s.device());
  r.grads = read_all(s.grads(), s.flat_numel(), s.device());
  for (const StateTensor& st : opt.state()) {
    EXPECT_EQ(st.tensor.device(), s.device()) << st.name;
    EXPECT_EQ(st.tensor.numel(), s.flat_numel()) << st.name;
    r.state_names.push_back(st.name);
    r.state.push_back(read_all(st.tensor.data<float>(), st.tensor.numel(), st.tensor.device()));
  }
  return r;
}

void expect_same_run(const Trajectory& gpu, const Trajectory& cpu, const std::string& what) {
  ASSERT_EQ(gpu.norms.size(), cpu.norms.size());
  for (std::size_t i = 0; i < cpu.norms.size(); ++i) {
    EXPECT_LE(std::fabs(gpu.norms[i] - cpu.norms[i]), kNormBound * cpu.norms[i])
        << what << " norm of step " << i << ": " << gpu.norms[i] << " vs " << cpu.norms[i];
  }
  testing::expect_close(gpu.params, cpu.params, kStateBound, what + " params");
  ASSERT_EQ(gpu.state_names, cpu.state_names) << what;
  for (std::size_t i = 0; i < cpu.state.size(); ++i) {
    testing::expect_close(gpu.state[i], cpu.state[i], kStateBound, what + " " + cpu.state_names[i]);
  }
}

OptimConfig make_config(const char* name, double wd) {
  OptimConfig c;
  c.name = name;
  c.weight_decay = wd;
  return c;
}

TEST(CudaOptimizers, SgdMatchesTheCpuOverFiveClippedSteps) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  OptimConfig c = make_config("sgd", 0.01);
  expect_same_run(run(c, *ctx), run(c, ExecContext::cpu()), "sgd");
  c.momentum = 0.9;
  c.dampening = 0.1;
  expect_same_run(run(c, *ctx), run(c, ExecContext::cpu()), "sgd momentum");
  c.dampening = 0.0;
  c.nesterov = true;
  expect_same_run(run(c, *ctx), run(c, ExecContext::cpu()), "sgd nesterov");
}

TEST(CudaOptimizers, AdamAndAdamWMatchTheCpuOverFiveClippedSteps) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  for (const char* name : {"adam", "adamw"}) {
    OptimConfig c = make_config(name, 0.05);
    c.beta2 = 0.95;
    expect_same_run(run(c, *ctx), run(c, ExecContext::cpu()), name);
    // Steps 2..4 communicate the momentum and keep the variance frozen.
    c.communicate = "momentum";
    c.freeze_steps = 2;
    expect_same_run(run(c, *ctx), run(c, ExecContext::cpu()), std::string(name) + " frozen");
  }
}

// The modes with per-rank state on the device (optim.h): the update sent (c) by SGD with
// momentum, Adam and AdamW, and the momentum sent (b) with the variance frozen from step 2,
// each with its gradient clipped locally in place (binding from step 1 on) before the mode's
// kernels read it.
TEST(CudaOptimizers, LocallyClippedUpdateAndMomentumModesMatchTheCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  OptimConfig sgd = make_config("sgd", 0.01);
  sgd.communicate = "update";
  sgd.momentum = 0.9;
  const Trajectory gpu = run(sgd, *ctx, nullptr, /*local_clip=*/true);
  const Trajectory cpu = run(sgd, ExecContext::cpu(), nullptr, /*local_clip=*/true);
  ASSERT_EQ(cpu.norms.size(), static_cast<std::size_t>(kSteps));
  EXPECT_LT(cpu.norms[0], kMaxNorm);
  EXPECT_GT(cpu.norms[1], kMaxNorm);
  expect_same_run(gpu, cpu, "sgd update");
  sgd.momentum = 0.0;
  expect_same_run(run(sgd, *ctx, nullptr, true), run(sgd, ExecContext::cpu(), nullptr, true),
                  "sgd update, no momentum");
  for (const char* name : {"adam", "adamw"}) {
    OptimConfig c = make_config(name, 0.05);
    c.beta2 = 0.95;
    c.communicate = "update";
    expect_same_run(run(c, *ctx, nullptr, true), run(c, ExecContext::cpu(), nullptr, true),
                    std::string(name) + " update");
    c.communicate = "momentum";
    c.freeze_steps = 2;
    expect_same_run(run(c, *ctx, nullptr, true), run(c, ExecContext::cpu(), nullptr, true),
                    std::string(name) + " momentum, clipped locally");
  }
}

TEST(CudaOptimizers, ClipIsFoldedIntoTheStepAndConsumedByIt) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  OptimConfig c = make_config("sgd", 0.01);
  c.momentum = 0.9;
  // Clipped at step 1 and at the last step, both binding: steps 2 and 3 must see their
  // gradients unscaled on both devices (the scale is consumed by the step it was made for).
  const std::vector<int> clip_steps = {1, kSteps - 1};
  const Trajectory gpu = run(c, *ctx, &clip_steps), cpu = run(c, ExecContext::cpu(), &clip_steps);
  ASSERT_EQ(gpu.norms.size(), 2u);
  EXPECT_GT(gpu.norms[0], kMaxNorm);
  EXPECT_GT(gpu.norms[1], kMaxNorm);
  expect_same_run(gpu, cpu, "sgd clipped twice");
  // The device never scales the gradient buffer: after the last step's binding clip it still
  // holds that step's gradients as written.
  ParamStore layout = make_store(ExecContext::cpu());
  EXPECT_EQ(gpu.grads, grads_for(layout, kSteps - 1));
}

TEST(CudaOptimizers, ClipScaleOfOneStepEqualsTheCpusInPlaceScaling) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  // Plain SGD, one step: p - lr * (scale * g + wd * p), with the scale computed on each device.
  for (const double max_norm : {1.0, 1e9, 0.0}) {  // binding, not binding, measure only
    ParamStore gs = make_store(*ctx), cs = make_store(ExecContext::cpu());
    const OptimConfig c = make_config("sgd", 0.01);
    auto gpu_opt = std::move(make_optimizer(c, gs)).value();
    auto cpu_opt = std::move(make_optimizer(c, cs)).value();
    const std::vector<float> g = grads_for(cs, 3);
    write_grads(gs, g);
    write_grads(cs, g);
    const double gpu_norm = gpu_opt->clip_grad_norm(max_norm);
    const double cpu_norm = clip_grad_norm(cs, max_norm);  // the free function: the CPU path
    EXPECT_LE(std::fabs(gpu_norm - cpu_norm), kNormBound * cpu_norm) << max_norm;
    gpu_opt->step(0.1);
    cpu_opt->step(0.1);
    testing::expect_close(read_all(gs.params(), gs.flat_numel(), Device::kCUDA),
                          read_all(cs.params(), cs.flat_numel(), Device::kCPU), kStateBound,
                          "one clipped sgd step, max_norm " + std::to_string(max_norm));
  }
}

}  // namespace
}  // namespace sparq::optim
