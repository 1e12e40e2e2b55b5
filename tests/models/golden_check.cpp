#include "models/golden_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/ops.h"
#include "core/tensor_copy.h"
#include "models/bert.h"

namespace sparq::testing {
namespace {

constexpr double kZeroFloor = 1e-6;
constexpr float kTrajLr = 0.05f;  // TRAJ_LR of gen_models.py

// The whole flat buffer of the store as one 1-D view.
Tensor flat(const ParamStore& s, bool grads) {
  const ParamRange all{0, s.flat_numel()};
  return grads ? s.grad_range(all) : s.param_range(all);
}

// The store's flat gradient or parameter buffer on the host (a copy only on a GPU).
const float* host_flat(const ParamStore& s, bool grads, std::vector<float>& staging) {
  return host_floats(flat(s, grads), staging);
}

}  // namespace

void reload_formula_weights(GoldenCase& c) {
  if (!c.store.context().is_cuda()) {
    load_formula_weights(c.golden, c.store);
    return;
  }
  ParamStore host;
  c.model->declare(host);
  host.allocate();
  load_formula_weights(c.golden, host);
  copy_from_host(host.params(), flat(c.store, false));
}

void load_golden_case(const std::string& file, const ExecContext& context, GoldenCase* out,
                      const std::string& spec_suffix) {
  out->golden = load_golden(golden_path(file));
  const Golden& g = out->golden;
  ASSERT_FALSE(g.params.empty());
  auto config = parse_model_spec(g.spec + spec_suffix);
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  auto model = make_model(config.value(), {g.batch, g.seq});
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  out->model = std::move(model).value();
  out->model->declare(out->store);
  const auto& entries = out->store.entries();
  ASSERT_EQ(entries.size(), g.params.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].spec.name, g.params[i].name) << "parameter " << i << " out of order";
    EXPECT_EQ(entries[i].spec.shape.str(), g.params[i].shape.str()) << entries[i].spec.name;
  }
  out->store.allocate(context);
  reload_formula_weights(*out);
  out->model->bind(out->store);
  const char* names[7] = {"tokens", "targets", "mask", "token_types", "nsp_labels", "images",
                          "labels"};
  Tensor* fields[7] = {&out->batch.tokens,      &out->batch.targets,    &out->batch.attention_mask,
                       &out->batch.token_types, &out->batch.nsp_labels, &out->batch.images,
                       &out->batch.labels};
  for (int i = 0; i < 7; ++i) {
    const std::string key = std::string("input/") + names[i];
    if (!g.has(key)) continue;
    const Tensor& host = g.tensor(key);
    if (!context.is_cuda()) {
      *fields[i] = host;
      continue;
    }
    out->device_inputs[i] = Buffer::device(host.nbytes());
    *fields[i] = Tensor(out->device_inputs[i].data(), host.dtype(), host.shape(), Device::kCUDA);
    copy_from_host(host.raw(), *fields[i]);
  }
}

void check_golden_phase(GoldenCase& c, const std::string& phase, bool training) {
  const Golden& g = c.golden;
  c.store.zero_grads();
  c.model->set_training(training);
  const float loss = c.model->forward(c.batch);
  EXPECT_NEAR(loss, g.scalar(phase + "/loss"), c.rtol * std::fabs(g.scalar(phase + "/loss")))
      << phase << " loss";
  // LM logits are [B, T, padded_vocab]; the reference keeps the vocab_size real columns.
  // The fused head keeps none: its loss and gradients are what is compared.
  std::vector<float> staging;
  if (!c.model->fused_head()) {
    const Tensor logits = c.model->logits();
    expect_close(phase + "/logits", host_floats(logits, staging), logits.dim(logits.ndim() - 1),
                 g.tensor(phase + "/logits"), c.rtol);
  }
  if (g.has(phase + "/nsp_logits")) {
    const Tensor nsp = dynamic_cast<Bert&>(*c.model).nsp_logits();
    expect_close(phase + "/nsp_logits", host_floats(nsp, staging), nsp.dim(1),
                 g.tensor(phase + "/nsp_logits"), c.rtol);
  }
  c.model->backward();
  // Exactly-zero gradients (conv biases feeding BatchNorm, whose mean subtraction cancels
  // them) come out of float32 as rounding noise of the summed terms, so those are held to
  // a floor tied to the largest gradient of the model instead.
  double largest = 0;
  for (const auto& p : g.params) {
    const Tensor& e = g.tensor(phase + "/grad/" + p.name);
    largest = std::max<double>(largest, ops::max_abs(e.data<float>(), e.numel()));
  }
  const float* grads = host_flat(c.store, true, staging);
  for (const auto& p : g.params) {
    const ParamEntry& e = c.store.entry(p.name);
    const Tensor actual(const_cast<float*>(grads) + e.offset, DType::kF32, e.spec.shape);
    expect_close(phase + "/grad/" + p.name, actual, g.tensor(phase + "/grad/" + p.name), c.rtol,
                 kZeroFloor * largest);
  }
}

// Plain SGD from the initial weights; the losses before each update must follow PyTorch's.
void check_golden_trajectory(GoldenCase& c) {
  reload_formula_weights(c);
  c.model->set_training(true);
  const std::size_t n = static_cast<std::size_t>(c.store.flat_numel());
  const std::vector<double>& expected = c.golden.scalars.at("trajectory");
  ASSERT_GE(expected.size(), 2u);
  std::vector<float> grads_host, params_host;
  for (std::size_t step = 0; step < expected.size(); ++step) {
    c.store.zero_grads();
    const float loss = c.model->forward_for_backward(c.batch);
    EXPECT_NEAR(loss, expected[step], c.rtol * std::fabs(expected[step]))
        << "trajectory step " << step;
    c.model->backward();
    // The alignment gaps of the gradient layout are zero, so a flat update is exact. A GPU
    // store is updated on the host: the test checks the model, not an optimizer.
    const float* g = host_flat(c.store, true, grads_host);
    const bool on_device = c.store.context().is_cuda();
    if (on_device) {
      params_host.resize(n);
      copy_to_host(flat(c.store, false), params_host.data());
    }
    float* p = on_device ? params_host.data() : c.store.params();
    ops::axpy(-kTrajLr, g, p, n);
    if (on_device) copy_from_host(p, flat(c.store, false));
  }
}

}  // namespace sparq::testing
