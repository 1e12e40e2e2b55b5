// The flash attention kernels (attention_flash.cpp) on shapes that span several tiles and
// end in partial ones: against the materialized kernel (the previous implementation, the
// CUDA kernels' twin), against float64 central differences, and bit-identical results with
// 1 and 2 threads. Also the layer's cache, which no longer holds [B, H, T, T].
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/threading.h"
#include "layer_test_util.h"
#include "layers/attention.h"

namespace sparq {
namespace {

using testing::random_vec;

struct FlashCase {
  std::int64_t batch, seq, dim, heads;
  bool causal, padding;
  float dropout;
};

// Sequence 1 pads its last third; the last sequence (when batch > 2) is padding throughout,
// so its rows see no key at all.
std::vector<std::uint8_t> padding_mask(std::int64_t batch, std::int64_t seq) {
  std::vector<std::uint8_t> valid(batch * seq, 1);
  for (std::int64_t j = seq - seq / 3; j < seq && batch > 1; ++j) valid[seq + j] = 0;
  if (batch > 2) std::fill(valid.end() - seq, valid.end(), std::uint8_t{0});
  return valid;
}

AttentionGeom geom_of(const FlashCase& fc, const std::vector<std::uint8_t>& valid) {
  AttentionGeom g;
  g.batch = fc.batch, g.seq = fc.seq, g.dim = fc.dim, g.heads = fc.heads, g.causal = fc.causal;
  g.key_valid = fc.padding ? valid.data() : nullptr;
  g.dropout_p = fc.dropout;
  g.key = DropoutKey::make({7, 1, 3, true}, 5);
  return g;
}

// max |got - want| / max |want|.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

struct FlashResult {
  std::vector<float> lse, ctx, dqkv;
};

FlashResult run_flash(const AttentionGeom& g, const std::vector<float>& qkv,
                      const std::vector<float>& dctx, int slots) {
  FlashResult r{std::vector<float>(g.batch * g.heads * g.seq), std::vector<float>(dctx.size()),
                std::vector<float>(qkv.size(), 7.0f)};
  std::vector<float> scratch(slots * cpu::attention_scratch_per_slot(g.seq, g.head_dim()));
  cpu::attention_forward<float>(g, qkv.data(), r.lse.data(), r.ctx.data(), scratch.data(), slots);
  cpu::attention_backward<float>(g, qkv.data(), r.ctx.data(), r.lse.data(), dctx.data(),
                                 r.dqkv.data(), scratch.data(), slots);
  return r;
}

const FlashCase kCases[] = {
    {2, 130, 48, 4, true, false, 0.0f},    // three tiles, the last of 2 rows; D = 12
    {3, 70, 128, 2, false, true, 0.0f},    // D = 64, an empty sequence
    {3, 67, 40, 5, true, true, 0.2f},      // causal + padding + dropout, D = 8
    {1, 200, 64, 1, false, false, 0.1f},   // bidirectional with dropout
    {2, 9, 6, 3, true, false, 0.0f},       // one partial tile, D = 2
};

TEST(FlashAttention, MatchesMaterializedKernel) {
  for (const FlashCase& fc : kCases) {
    SCOPED_TRACE(::testing::Message() << "T=" << fc.seq << " C=" << fc.dim << " H=" << fc.heads
                                      << " causal=" << fc.causal << " pad=" << fc.padding
                                      << " p=" << fc.dropout);
    const auto valid = padding_mask(fc.batch, fc.seq);
    const AttentionGeom g = geom_of(fc, valid);
    const std::int64_t tokens = fc.batch * fc.seq, bhtt = fc.batch * fc.heads * fc.seq * fc.seq;
    const auto qkv = testing::to_float(random_vec(tokens * 3 * fc.dim, 51, 1.5));
    const auto dctx = testing::to_float(random_vec(tokens * fc.dim, 52));
    const FlashResult flash = run_flash(g, qkv, dctx, max_threads());

    std::vector<float> probs(bhtt), ctx(dctx.size()), dqkv(qkv.size());
    std::vector<float> scratch(max_threads() * cpu::attention_materialized_scratch_per_slot(fc.seq));
    cpu::attention_forward_materialized<float>(g, qkv.data(), probs.data(), ctx.data(),
                                               scratch.data(), max_threads());
    cpu::attention_backward_materialized<float>(g, qkv.data(), probs.data(), dctx.data(),
                                                dqkv.data(), scratch.data(), max_threads());
    std::vector<float> rebuilt(bhtt);
    cpu::attention_probs<float>(g, qkv.data(), flash.lse.data(), rebuilt.data());
    EXPECT_LT(relative_error(rebuilt, probs), 1e-5);
    EXPECT_LT(relative_error(flash.ctx, ctx), 1e-5);
    EXPECT_LT(relative_error(flash.dqkv, dqkv), 1e-5);
    for (std::int64_t e = 0; e < bhtt; ++e) {  // masked keys and empty rows: exactly 0
      if (probs[e] == 0.0f) {
        ASSERT_EQ(rebuilt[e], 0.0f) << e;
      }
    }
    if (fc.padding && fc.batch > 2) {  // the empty sequence: zero context and gradients
      const std::int64_t last = (fc.batch - 1) * fc.seq;
      for (std::int64_t e = last * fc.dim; e < tokens * fc.dim; ++e) ASSERT_EQ(flash.ctx[e], 0.0f);
      for (std::int64_t e = last * 3 * fc.dim; e < tokens * 3 * fc.dim; ++e) {
        ASSERT_EQ(flash.dqkv[e], 0.0f);
      }
    }
  }
}

TEST(FlashAttention, OneAndTwoThreadsAreBitIdentical) {
  const int saved = max_threads();
  for (const FlashCase& fc : kCases) {
    const auto valid = padding_mask(fc.batch, fc.seq);
    const AttentionGeom g = geom_of(fc, valid);
    const std::int64_t tokens = fc.batch * fc.seq;
    const auto qkv = testing::to_float(random_vec(tokens * 3 * fc.dim, 53));
    const auto dctx = testing::to_float(random_vec(tokens * fc.dim, 54));
    set_num_threads(1);
    const FlashResult one = run_flash(g, qkv, dctx, 1);
    set_num_threads(2);
    const FlashResult two = run_flash(g, qkv, dctx, 2);
    EXPECT_EQ(one.lse, two.lse) << fc.seq;
    EXPECT_EQ(one.ctx, two.ctx) << fc.seq;
    EXPECT_EQ(one.dqkv, two.dqkv) << fc.seq;
  }
  set_num_threads(saved);
}

TEST(FlashAttention, MultiTileBackwardMatchesFiniteDifferences) {
  for (const FlashCase& fc : {FlashCase{2, 70, 6, 2, true, true, 0.25f},
                              FlashCase{2, 131, 4, 1, false, true, 0.0f}}) {
    const auto valid = padding_mask(fc.batch, fc.seq);
    const AttentionGeom g = geom_of(fc, valid);
    const std::int64_t tokens = fc.batch * fc.seq;
    auto qkv = random_vec(tokens * 3 * fc.dim, 55), r = random_vec(tokens * fc.dim, 56);
    std::vector<double> lse(fc.batch * fc.heads * fc.seq), ctx(tokens * fc.dim);
    std::vector<double> scratch(max_threads() * cpu::attention_scratch_per_slot(fc.seq, g.head_dim()));
    auto loss = [&] {
      cpu::attention_forward<double>(g, qkv.data(), lse.data(), ctx.data(), scratch.data(),
                                     max_threads());
      return testing::weighted_sum(ctx, r);
    };
    loss();
    std::vector<double> dqkv(qkv.size());
    cpu::attention_backward<double>(g, qkv.data(), ctx.data(), lse.data(), r.data(), dqkv.data(),
                                    scratch.data(), max_threads());
    testing::expect_gradient(loss, qkv, dqkv, "dqkv", 300);
  }
}

TEST(FlashAttention, LayerCacheIsLinearInSequenceLength) {
  // GPT-2 124M's attention at T = 1024: the materialized probabilities alone would take
  // B*H*T*T floats (48 MiB per sequence); the flash cache is qkv, lse and ctx.
  const std::int64_t b = 1, t = 1024, c = 768, h = 12;
  MultiHeadAttention mha("attn", {c, h, t, b, true, 0.0f, 1});
  const std::size_t activations = (b * t * 4 * c + b * h * t) * sizeof(float);
  const std::size_t per_slot = cpu::attention_scratch_per_slot(t, c / h) * sizeof(float);
  EXPECT_EQ(mha.cache_bytes(), activations);
  EXPECT_EQ(mha.workspace_bytes(), b * t * 4 * c * sizeof(float) + max_threads() * per_slot);
  EXPECT_LT(mha.cache_bytes() + mha.workspace_bytes(), b * h * t * t * sizeof(float));  // < P
}

}  // namespace
}  // namespace sparq
