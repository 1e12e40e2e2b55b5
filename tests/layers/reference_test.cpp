// Every layer against PyTorch: inputs, parameters, outputs and gradients written by
// tests/reference/gen_layers.py (torch in float64 on f32 inputs). sparq runs in f32 through
// the public layer classes and must agree to ~1e-5 relative.
#include <gtest/gtest.h>

#include "layer_test_util.h"
#include "layers/activation.h"
#include "layers/attention.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/cross_entropy.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/pooling.h"

namespace sparq {
namespace {

using testing::expect_close;
using testing::RefCase;

// Buffers for y, dx shaped like the reference's y and x.
struct Io {
  std::vector<float> x, y, dy, dx;
  Shape xs, ys;
  Io(const RefCase& ref, const std::string& x_key = "x")
      : x(ref.f32(x_key)), y(ref.at("y").f32.size()), dy(ref.f32("dy")), dx(x.size()),
        xs(ref.at(x_key).shape()), ys(ref.at("y").shape()) {}
  Tensor vx() { return testing::view(x, xs); }
  Tensor vy() { return testing::view(y, ys); }
  Tensor vdy() { return testing::view(dy, ys); }
  Tensor vdx() { return testing::view(dx, xs); }
};

void load_params(const RefCase& ref, const ParamStore& store, const std::string& prefix,
                 const std::vector<std::string>& names) {
  for (const auto& n : names) testing::copy_into(store.param(prefix + n), ref.f32(n));
}

void expect_grads(const RefCase& ref, const ParamStore& store, const std::string& prefix,
                  const std::vector<std::string>& names) {
  for (const auto& n : names) expect_close(store.grad(prefix + n).data<float>(), ref.f32("d" + n), "d" + n);
}

TEST(Reference, Linear) {
  RefCase ref("linear");
  Io io(ref);
  Linear lin("fc", {7, 3, true});
  ParamStore store = testing::bind_layers(lin);
  load_params(ref, store, "fc.", {"weight", "bias"});
  lin.forward(io.vx(), io.vy());
  expect_close(io.y.data(), ref.f32("y"), "y");
  lin.backward(io.vx(), io.vdy(), io.vdx());
  expect_close(io.dx.data(), ref.f32("dx"), "dx");
  expect_grads(ref, store, "fc.", {"weight", "bias"});
}

TEST(Reference, Conv2d) {
  for (const char* name : {"conv2d_s2p1", "conv2d_dil2_nobias", "conv2d_1x1"}) {
    SCOPED_TRACE(name);
    RefCase ref(name);
    Io io(ref);
    const auto& cfg = ref.at("config").i32;  // stride, pad, dilation, bias
    const auto& w = ref.at("weight").dims;
    Conv2d conv("conv", {w[1], w[0], w[2], w[3], cfg[0], cfg[1], cfg[2], cfg[3] != 0, io.xs[2], io.xs[3]});
    ParamStore store = testing::bind_layers(conv);
    std::vector<std::string> names{"weight"};
    if (cfg[3]) names.push_back("bias");
    load_params(ref, store, "conv.", names);
    conv.forward(io.vx(), io.vy());
    expect_close(io.y.data(), ref.f32("y"), "y");
    conv.backward(io.vx(), io.vdy(), io.vdx());
    expect_close(io.dx.data(), ref.f32("dx"), "dx");
    expect_grads(ref, store, "conv.", names);
  }
}

TEST(Reference, Pooling) {
  for (const char* name : {"maxpool_k3s2p1", "maxpool_k2s2"}) {
    SCOPED_TRACE(name);
    RefCase ref(name);
    Io io(ref);
    const auto& cfg = ref.at("config").i32;
    MaxPool2d pool("pool", {io.xs[1], io.xs[2], io.xs[3], cfg[0], cfg[1], cfg[2], io.xs[0]});
    pool.forward(io.vx(), io.vy());
    expect_close(io.y.data(), ref.f32("y"), "y");
    pool.backward(io.vdy(), io.vdx());
    expect_close(io.dx.data(), ref.f32("dx"), "dx");
  }
  for (const char* name : {"avgpool_7x5_to_3x2", "avgpool_global"}) {
    SCOPED_TRACE(name);
    RefCase ref(name);
    Io io(ref);
    const auto& cfg = ref.at("config").i32;
    AdaptiveAvgPool2d pool("pool", cfg[0], cfg[1]);
    pool.forward(io.vx(), io.vy());
    expect_close(io.y.data(), ref.f32("y"), "y");
    pool.backward(io.vdy(), io.vdx());
    expect_close(io.dx.data(), ref.f32("dx"), "dx");
  }
}

TEST(Reference, BatchNorm2d) {
  for (bool training : {true, false}) {
    RefCase ref(training ? "batchnorm_train" : "batchnorm_eval");
    SCOPED_TRACE(training ? "train" : "eval");
    Io io(ref);
    BatchNorm2d bn("bn", {io.xs[1], 1e-5f, 0.1f});
    ParamStore store = testing::bind_layers(bn);
    load_params(ref, store, "bn.", {"weight", "bias"});
    testing::copy_into(bn.running_mean(), ref.f32("running_mean"));
    testing::copy_into(bn.running_var(), ref.f32("running_var"));
    bn.forward(io.vx(), io.vy(), training);
    expect_close(io.y.data(), ref.f32("y"), "y");
    expect_close(bn.running_mean().data<float>(), ref.f32("running_mean_after"), "running_mean");
    expect_close(bn.running_var().data<float>(), ref.f32("running_var_after"), "running_var");
    bn.backward(io.vx(), io.vdy(), io.vdx());
    expect_close(io.dx.data(), ref.f32("dx"), "dx");
    expect_grads(ref, store, "bn.", {"weight", "bias"});
  }
}

TEST(Reference, Activations) {
  for (const char* name : {"relu", "gelu_tanh", "gelu_erf", "tanh"}) {
    SCOPED_TRACE(name);
    RefCase ref(name);
    Io io(ref);
    const std::string n = name;
    if (n == "relu") {
      Relu().forward(io.vx(), io.vy());
      Relu().backward(io.vy(), io.vdy(), io.vdx());
    } else if (n == "tanh") {
      Tanh().forward(io.vx(), io.vy());
      Tanh().backward(io.vy(), io.vdy(), io.vdx());
    } else {
      const Gelu gelu(n == "gelu_tanh" ? GeluKind::kTanh : GeluKind::kErf);
      gelu.forward(io.vx(), io.vy());
      gelu.backward(io.vx(), io.vdy(), io.vdx());
    }
    expect_close(io.y.data(), ref.f32("y"), "y");
    expect_close(io.dx.data(), ref.f32("dx"), "dx");
  }
}

TEST(Reference, DropoutMaskMatchesIndependentPhilox) {
  RefCase ref("dropout");
  Io io(ref);
  const auto& rng = ref.at("rng").i32;  // seed, rank, layer, step
  Dropout drop("drop", ref.f32("p")[0], static_cast<std::uint32_t>(rng[2]));
  const DropoutStep step{static_cast<std::uint64_t>(rng[0]), static_cast<std::uint32_t>(rng[1]),
                         static_cast<std::uint64_t>(rng[3]), true};
  drop.forward(io.vx(), io.vy(), step);
  expect_close(io.y.data(), ref.f32("y"), "y");
  drop.backward(io.vdy(), io.vdx(), step);
  expect_close(io.dx.data(), ref.f32("dx"), "dx");
}

TEST(Reference, LayerNorm) {
  RefCase ref("layernorm");
  Io io(ref);
  LayerNorm ln("ln", {io.xs[1], 1e-5f, io.xs[0]});
  ParamStore store = testing::bind_layers(ln);
  load_params(ref, store, "ln.", {"weight", "bias"});
  ln.forward(io.vx(), io.vy());
  expect_close(io.y.data(), ref.f32("y"), "y");
  ln.backward(io.vx(), io.vdy(), io.vdx());
  expect_close(io.dx.data(), ref.f32("dx"), "dx");
  expect_grads(ref, store, "ln.", {"weight", "bias"});
}

TEST(Reference, EmbeddingAndTiedHead) {
  RefCase ref("embedding");
  const auto& w = ref.at("weight").dims;
  Embedding emb("wte", {w[0], w[1]});
  ParamStore store = testing::bind_layers(emb);
  load_params(ref, store, "wte.", {"weight"});
  std::vector<std::int32_t> ids = ref.at("ids").i32;
  const Tensor idv(ids.data(), DType::kI32, {static_cast<std::int64_t>(ids.size())});
  std::vector<float> y(ref.at("y").f32.size()), dy = ref.f32("dy");
  emb.forward(idv, testing::view(y, ref.at("y").shape()));
  expect_close(y.data(), ref.f32("y"), "y");
  emb.backward(idv, testing::view(dy, ref.at("y").shape()));
  expect_grads(ref, store, "wte.", {"weight"});

  RefCase head("embedding_tied_head");
  Io io(head);
  Embedding tied("wte", {w[0], w[1]});
  ParamStore store2 = testing::bind_layers(tied);
  load_params(head, store2, "wte.", {"weight"});
  tied.project(io.vx(), io.vy());
  expect_close(io.y.data(), head.f32("y"), "logits");
  tied.project_backward(io.vx(), io.vdy(), io.vdx());
  expect_close(io.dx.data(), head.f32("dx"), "dx");
  expect_grads(head, store2, "wte.", {"weight"});
}

TEST(Reference, MultiHeadAttention) {
  for (const char* name : {"attention_causal", "attention_padding", "attention_causal_dropout"}) {
    SCOPED_TRACE(name);
    RefCase ref(name);
    Io io(ref);
    const auto& cfg = ref.at("config").i32;  // heads, causal, padding
    const auto& rng = ref.at("rng").i32;     // seed, rank, layer, step
    MultiHeadAttention mha("attn", {io.xs[2], cfg[0], io.xs[1], io.xs[0], cfg[1] != 0,
                                    ref.f32("p")[0], static_cast<std::uint32_t>(rng[2])});
    ParamStore store = testing::bind_layers(mha);
    const std::vector<std::string> names{"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"};
    load_params(ref, store, "attn.", names);
    std::vector<std::uint8_t> valid = cfg[2] ? ref.at("key_valid").u8 : std::vector<std::uint8_t>();
    const Tensor mask = cfg[2] ? Tensor(valid.data(), DType::kU8, {io.xs[0], io.xs[1]}) : Tensor();
    const DropoutStep step{static_cast<std::uint64_t>(rng[0]), static_cast<std::uint32_t>(rng[1]),
                           static_cast<std::uint64_t>(rng[3]), true};
    mha.forward(io.vx(), io.vy(), mask, step);
    expect_close(mha.probs().data<float>(), ref.f32("probs"), "probs");
    expect_close(io.y.data(), ref.f32("y"), "y");
    mha.backward(io.vx(), io.vdy(), io.vdx(), step);
    expect_close(io.dx.data(), ref.f32("dx"), "dx");
    expect_grads(ref, store, "attn.", names);
  }
}

TEST(Reference, CrossEntropy) {
  RefCase ref("cross_entropy");
  std::vector<float> logits = ref.f32("logits"), dl(logits.size());
  const Shape s = ref.at("logits").shape();
  std::vector<std::int32_t> t = ref.at("targets").i32;
  CrossEntropy ce("ce", {s[1], ref.at("valid_vocab").i32[0], -100, s[0]});
  const float loss = ce.forward_backward(testing::view(logits, s),
                                         Tensor(t.data(), DType::kI32, {s[0]}), testing::view(dl, s));
  expect_close(&loss, ref.f32("loss"), "loss");
  expect_close(dl.data(), ref.f32("dlogits"), "dlogits");
}

}  // namespace
}  // namespace sparq
