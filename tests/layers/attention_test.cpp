// Attention core and MultiHeadAttention, and softmax cross-entropy: hand-computed forward,
// float64 central differences (causal, padding and dropout variants), accumulation.
#include <gtest/gtest.h>

#include <cmath>

#include "core/threading.h"
#include "layer_test_util.h"
#include "layers/attention.h"
#include "layers/cross_entropy.h"

namespace sparq {
namespace {

using testing::expect_gradient;
using testing::random_vec;
using testing::weighted_sum;

TEST(Attention, HandComputedCausalForward) {
  // T = 2, C = 2, one head, q = k = 0: causal row 0 sees token 0 only, row 1 averages both.
  AttentionGeom g;
  g.batch = 1, g.seq = 2, g.dim = 2, g.heads = 1, g.causal = true;
  std::vector<float> qkv{0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 3, 6}, lse(2), probs(4), ctx(4);
  std::vector<float> scratch(max_threads() * cpu::attention_scratch_per_slot(2, 2));
  cpu::attention_forward<float>(g, qkv.data(), lse.data(), ctx.data(), scratch.data(), max_threads());
  EXPECT_EQ(lse, (std::vector<float>{0, std::log(2.0f)}));  // log-sum-exp of zero scores
  cpu::attention_probs<float>(g, qkv.data(), lse.data(), probs.data());
  const std::vector<float> want_probs{1, 0, 0.5f, 0.5f};
  for (int e = 0; e < 4; ++e) EXPECT_NEAR(probs[e], want_probs[e], 1e-7f) << e;
  EXPECT_EQ(ctx, (std::vector<float>{1, 2, 2, 4}));
  // Bidirectional with token 1 masked out as padding: both rows see token 0 only.
  std::vector<std::uint8_t> valid{1, 0};
  g.causal = false;
  g.key_valid = valid.data();
  cpu::attention_forward<float>(g, qkv.data(), lse.data(), ctx.data(), scratch.data(), max_threads());
  EXPECT_EQ(ctx, (std::vector<float>{1, 2, 1, 2}));
}

struct AttnCase { bool causal, padding; float dropout; };

TEST(Attention, BackwardMatchesFiniteDifferences) {
  for (const AttnCase& ac : {AttnCase{true, false, 0.0f}, AttnCase{false, true, 0.0f},
                             AttnCase{true, true, 0.3f}}) {
    AttentionGeom g;
    g.batch = 2, g.seq = 5, g.dim = 6, g.heads = 3, g.causal = ac.causal;
    std::vector<std::uint8_t> valid{1, 1, 1, 0, 0, 1, 1, 1, 1, 0};
    if (ac.padding) g.key_valid = valid.data();
    g.dropout_p = ac.dropout;
    g.key = DropoutKey::make({5, 0, 2, true}, 9);
    const std::int64_t tokens = g.batch * g.seq;
    auto qkv = random_vec(tokens * 3 * g.dim, 41), r = random_vec(tokens * g.dim, 42);
    std::vector<double> lse(g.batch * g.heads * g.seq), ctx(tokens * g.dim);
    std::vector<double> scratch(max_threads() * cpu::attention_scratch_per_slot(g.seq, g.head_dim()));
    auto loss = [&] {
      cpu::attention_forward<double>(g, qkv.data(), lse.data(), ctx.data(), scratch.data(), max_threads());
      return weighted_sum(ctx, r);
    };
    loss();
    std::vector<double> dqkv(qkv.size(), 3.0);
    cpu::attention_backward<double>(g, qkv.data(), ctx.data(), lse.data(), r.data(), dqkv.data(),
                                    scratch.data(), max_threads());
    expect_gradient(loss, qkv, dqkv, "dqkv", 400);
  }
}

// Attention dropout's draws of one step lie below 2^40 (DropoutKey): 128 rows x 2 heads x
// 65536^2 scores would have reused the next step's masks without a word (review, 2026-12-06).
TEST(MultiHeadAttentionDeathTest, DropoutOverMoreScoresThanAStepDrawsIsRefused) {
  EXPECT_DEATH(MultiHeadAttention("attn", {8, 2, 65536, 128, true, 0.1f, 0}),
               "attn: attention dropout over 128 x 2 heads x 65536\\^2 scores passes the "
               "2\\^40 draws a step holds");
}

TEST(MultiHeadAttention, TwoBackwardCallsAccumulateAndDropoutRepeats) {
  MultiHeadAttention mha("attn", {8, 2, 6, 2, true, 0.2f, 4});
  ParamStore store = testing::bind_layers(mha);
  EXPECT_EQ(mha.param_names(), (std::vector<std::string>{"attn.qkv.weight", "attn.qkv.bias",
                                                          "attn.proj.weight", "attn.proj.bias"}));
  auto x = testing::to_float(random_vec(2 * 5 * 8, 43)), dy = testing::to_float(random_vec(2 * 5 * 8, 44));
  std::vector<float> y(x.size()), y2(x.size()), dx(x.size());
  const Shape s{2, 5, 8};
  const DropoutStep step{3, 0, 1, true};
  mha.forward(testing::view(x, s), testing::view(y, s), Tensor(), step);
  mha.forward(testing::view(x, s), testing::view(y2, s), Tensor(), step);
  EXPECT_EQ(y, y2);  // the regenerated mask is the same mask
  mha.backward(testing::view(x, s), testing::view(dy, s), testing::view(dx, s), step);
  std::vector<std::vector<float>> first;
  for (const auto& n : mha.param_names()) first.push_back(testing::to_vector(store.grad(n)));
  const auto dx1 = dx;
  mha.backward(testing::view(x, s), testing::view(dy, s), testing::view(dx, s), step);
  for (std::size_t p = 0; p < first.size(); ++p) {
    const auto now = testing::to_vector(store.grad(mha.param_names()[p]));
    // Blocked GEMM accumulation may round differently from doubling; compare at f32 scale.
    float scale = 0;
    for (float v : first[p]) scale = std::max(scale, std::fabs(v));
    for (std::size_t i = 0; i < now.size(); ++i) ASSERT_NEAR(now[i], 2 * first[p][i], 1e-5f * scale) << p;
  }
  EXPECT_EQ(dx, dx1);
  EXPECT_EQ(store.range_of(mha.param_names()).offset, store.entry("attn.qkv.weight").offset);
}

// Note [Workspace turns]: two layers sharing one workspace, called in a model's order
// (forward a, forward b, backward b, backward a, so b's calls overwrite what a wrote), give
// the bits of two layers with workspaces of their own, with dropout on; the shared
// workspace is one layer's size, not two.
TEST(MultiHeadAttention, LayersSharingAWorkspaceGiveTheBitsOfLayersWithTheirOwn) {
  MultiHeadAttention::Config config_a{8, 2, 6, 2, true, 0.2f, 4};
  MultiHeadAttention::Config config_b = config_a;
  config_b.layer_index = 7;
  MultiHeadAttention own_a("a", config_a), own_b("b", config_b);
  MultiHeadAttention shared_a("a", config_a), shared_b("b", config_b);
  auto workspace = std::make_shared<SharedWorkspace>();
  shared_a.share_workspace(workspace);
  shared_b.share_workspace(workspace);
  EXPECT_EQ(workspace->bytes(), own_a.workspace_bytes());
  EXPECT_EQ(shared_b.workspace_bytes(), own_b.workspace_bytes());
  ParamStore own = testing::bind_layers(own_a, own_b);
  ParamStore shared = testing::bind_layers(shared_a, shared_b);

  const Shape s{2, 5, 8};
  const DropoutStep step{3, 0, 1, true};
  struct Run {
    std::vector<float> x, mid, y, dy, dmid, dx;
  };
  const auto run = [&](MultiHeadAttention& a, MultiHeadAttention& b) {
    Run r;
    r.x = testing::to_float(random_vec(2 * 5 * 8, 45));
    r.dy = testing::to_float(random_vec(2 * 5 * 8, 46));
    r.mid.resize(r.x.size());
    r.y.resize(r.x.size());
    r.dmid.resize(r.x.size());
    r.dx.resize(r.x.size());
    a.forward(testing::view(r.x, s), testing::view(r.mid, s), Tensor(), step);
    b.forward(testing::view(r.mid, s), testing::view(r.y, s), Tensor(), step);
    b.backward(testing::view(r.mid, s), testing::view(r.dy, s), testing::view(r.dmid, s), step);
    a.backward(testing::view(r.x, s), testing::view(r.dmid, s), testing::view(r.dx, s), step);
    return r;
  };
  const Run want = run(own_a, own_b), got = run(shared_a, shared_b);
  EXPECT_EQ(got.y, want.y);
  EXPECT_EQ(got.dmid, want.dmid);
  EXPECT_EQ(got.dx, want.dx);
  const auto n = static_cast<std::size_t>(own.flat_numel());
  EXPECT_EQ(std::vector<float>(shared.grads(), shared.grads() + n),
            std::vector<float>(own.grads(), own.grads() + n));
}

TEST(CrossEntropy, HandComputedForwardWithIgnoreAndPaddedVocab) {
  CrossEntropy ce("ce", {3, 2, -100, 3});
  // Row 0: logits [0, 0 | pad] target 0 -> log 2; row 1 ignored; row 2: [ln 3, 0] target 1
  // -> log 4. Mean over 2 counted rows.
  std::vector<float> logits{0, 0, 50, 9, 9, 9, std::log(3.0f), 0, -7}, dl(9);
  std::vector<std::int32_t> t{0, -100, 1};
  const Tensor tv(t.data(), DType::kI32, {3});
  const float loss = ce.forward_backward(testing::view(logits, {3, 3}), tv, testing::view(dl, {3, 3}));
  EXPECT_NEAR(loss, 0.5 * (std::log(2.0) + std::log(4.0)), 1e-6);
  EXPECT_EQ(ce.counted(), 2);
  const std::vector<float> want{-0.25f, 0.25f, 0, 0, 0, 0, 0.375f, -0.375f, 0};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(dl[i], want[i], 1e-6) << i;
  t[2] = 2;  // a padded column is not a valid target
  EXPECT_DEATH(ce.forward(testing::view(logits, {3, 3}), tv), "ce: target 2 at row 2 is outside \\[0, 2\\)");
}

TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  const std::int64_t n = 6, v = 9, valid = 8;
  std::vector<std::int32_t> t{4, 0, -1, 7, 7, 2};
  auto logits = random_vec(n * v, 45, 3.0);
  std::vector<double> rows(n), dl(n * v);
  cpu::cross_entropy<double>(logits.data(), t.data(), dl.data(), rows.data(), n, v, valid, -1, 1.5);
  expect_gradient([&] {
    return 1.5 * cpu::cross_entropy<double>(logits.data(), t.data(), nullptr, rows.data(), n, v, valid, -1, 1.0);
  }, logits, dl, "dlogits", 100);
}

}  // namespace
}  // namespace sparq
