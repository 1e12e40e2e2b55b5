// Golden tests: sparq's GPT-2, BERT and VGG against the independent PyTorch implementations
// of tests/reference/gen_models.py, from identical formula weights and stored inputs:
// logits, loss, every parameter gradient, and a 3-step SGD loss trajectory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/ops.h"
#include "models/bert.h"
#include "models/golden_io.h"
#include "models/model.h"

namespace sparq {
namespace {

using testing::expect_close;
using testing::Golden;

constexpr double kRtol = 1e-4;
constexpr double kZeroFloor = 1e-6;
constexpr float kTrajLr = 0.05f;  // TRAJ_LR of gen_models.py

struct Loaded {
  Golden golden;
  std::unique_ptr<Model> model;
  ParamStore store;
  Batch batch;
};

// Builds the model of a golden file, checks its parameters against the reference's (names,
// order, shapes), loads the formula weights and assembles the batch.
void load_case(const std::string& file, Loaded* out) {
  out->golden = testing::load_golden(testing::golden_path(file));
  const Golden& g = out->golden;
  ASSERT_FALSE(g.params.empty());
  auto config = parse_model_spec(g.spec);
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
  out->store.allocate();
  testing::load_formula_weights(g, out->store);
  out->model->bind(out->store);
  Batch& b = out->batch;
  const auto input = [&](const char* name) {
    return g.has(std::string("input/") + name) ? g.tensor(std::string("input/") + name) : Tensor();
  };
  b.tokens = input("tokens");
  b.targets = input("targets");
  b.attention_mask = input("mask");
  b.token_types = input("token_types");
  b.nsp_labels = input("nsp_labels");
  b.images = input("images");
  b.labels = input("labels");
}

// One forward + backward compared with the phase's reference values.
void check_phase(Loaded& c, const std::string& phase, bool training) {
  const Golden& g = c.golden;
  c.store.zero_grads();
  c.model->set_training(training);
  const float loss = c.model->forward(c.batch);
  EXPECT_NEAR(loss, g.scalar(phase + "/loss"), kRtol * std::fabs(g.scalar(phase + "/loss")))
      << phase << " loss";
  // LM logits are [B, T, padded_vocab]; the reference keeps the vocab_size real columns.
  const Tensor logits = c.model->logits();
  const Tensor& expected = g.tensor(phase + "/logits");
  expect_close(phase + "/logits", logits.data<float>(), logits.dim(logits.ndim() - 1), expected,
               kRtol);
  if (g.has(phase + "/nsp_logits")) {
    expect_close(phase + "/nsp_logits", dynamic_cast<Bert&>(*c.model).nsp_logits(),
                 g.tensor(phase + "/nsp_logits"), kRtol);
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
  for (const auto& p : g.params) {
    expect_close(phase + "/grad/" + p.name, c.store.grad(p.name),
                 g.tensor(phase + "/grad/" + p.name), kRtol, kZeroFloor * largest);
  }
}

// Plain SGD from the initial weights; the losses before each update must follow PyTorch's.
void check_trajectory(Loaded& c) {
  testing::load_formula_weights(c.golden, c.store);
  c.model->set_training(true);
  const std::size_t n = static_cast<std::size_t>(c.store.flat_numel());
  const std::vector<double>& expected = c.golden.scalars.at("trajectory");
  ASSERT_GE(expected.size(), 2u);
  for (std::size_t step = 0; step < expected.size(); ++step) {
    c.store.zero_grads();
    const float loss = c.model->forward(c.batch);
    EXPECT_NEAR(loss, expected[step], kRtol * std::fabs(expected[step])) << "trajectory step " << step;
    c.model->backward();
    // The alignment gaps of the gradient layout are zero, so a flat update is exact.
    ops::axpy(-kTrajLr, c.store.grads(), c.store.params(), n);
  }
}

TEST(ModelGolden, Gpt2ShortContextMatchesPyTorch) {
  Loaded c;
  ASSERT_NO_FATAL_FAILURE(load_case("gpt2.golden", &c));
  ASSERT_LT(c.golden.seq, c.model->config().n_ctx) << "the case must use a shorter context";
  ASSERT_GT(c.model->config().padded_vocab(), c.model->config().vocab_size);
  check_phase(c, "train", true);
  check_trajectory(c);
}

TEST(ModelGolden, Gpt2PaddedVocabularyIsNeverPredicted) {
  Loaded c;
  ASSERT_NO_FATAL_FAILURE(load_case("gpt2.golden", &c));
  c.store.zero_grads();
  c.model->forward(c.batch);
  c.model->backward();
  // Padded rows of the tied table get no gradient: neither looked up nor given probability.
  const ModelConfig& cfg = c.model->config();
  const Tensor dwte = c.store.grad("wte.weight");
  const float* pad = dwte.data<float>() + cfg.vocab_size * cfg.n_embd;
  const auto count = static_cast<std::size_t>((cfg.padded_vocab() - cfg.vocab_size) * cfg.n_embd);
  EXPECT_EQ(ops::max_abs(pad, count), 0.0f);
  // After backward the logits buffer holds dloss/dlogits: zero in the padded columns.
  const Tensor dlogits = c.model->logits();
  const std::int64_t v = dlogits.dim(2);
  for (std::int64_t r = 0; r < dlogits.numel() / v; ++r) {
    for (std::int64_t j = cfg.vocab_size; j < v; ++j) {
      ASSERT_EQ(dlogits.data<float>()[r * v + j], 0.0f) << "row " << r << " column " << j;
    }
  }
}

TEST(ModelGolden, BertWithPaddingAndNspMatchesPyTorch) {
  Loaded c;
  ASSERT_NO_FATAL_FAILURE(load_case("bert.golden", &c));
  // The case must exercise padding: some attention-mask entries are zero.
  const Tensor& mask = c.batch.attention_mask;
  std::int64_t padded = 0;
  for (std::int64_t i = 0; i < mask.numel(); ++i) padded += mask.data<std::uint8_t>()[i] == 0;
  ASSERT_GT(padded, 0);
  check_phase(c, "train", true);
  check_trajectory(c);
}

TEST(ModelGolden, VggTrainAndEvalMatchPyTorch) {
  Loaded c;
  ASSERT_NO_FATAL_FAILURE(load_case("vgg.golden", &c));
  check_phase(c, "train", true);  // batch statistics; updates the running ones once
  check_phase(c, "eval", false);  // running statistics
  check_trajectory(c);
}

}  // namespace
}  // namespace sparq
