// Properties every compressor must have, checked over a table of configurations: error
// feedback conserves mass, decode modes agree, encoding is deterministic and independent of
// the thread count, byte counts follow the documented formulas, and topk / blockquant / lbs
// are contractions with their documented delta.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "compress/error_feedback.h"
#include "compress/options.h"
#include "compress/randomk.h"
#include "core/half_math.h"
#include "core/ops.h"
#include "core/threading.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

using testing::make;
using testing::normal_vector;

using Case = testing::CompressorCase;

// dgc's error feedback adds momentum (T(g) != g): its mass rule is tested in dgc_test.cpp;
// gtopk's encode is topk's (its tree aggregation is tested under mpirun).
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Case& c : testing::all_compressor_cases()) {
    if (c.name != "dgc" && c.name != "gtopk") cases.push_back(std::move(c));
  }
  return cases;
}

std::string label(const Case& c) {
  std::string s = c.name;
  for (const auto& [k, v] : c.params) s += " " + k + "=" + v;
  return s;
}

EncodeContext context(std::int64_t step) {
  EncodeContext ctx;
  ctx.seed = 77;
  ctx.step = step;
  ctx.bucket_id = 3;
  ctx.rank = 1;
  ctx.world_size = 4;
  return ctx;
}

TEST(CompressorProperties, ErrorFeedbackConservesMass) {
  for (const Case& cs : all_cases()) {
    for (std::size_t n : {1u, 333u, 70001u}) {
      auto c = make(cs.name, cs.params);
      std::vector<float> residual = normal_vector(n, 5, 0.3f);
      const std::vector<float> old_residual = residual;
      ErrorFeedback ef(residual);
      for (int step = 0; step < 3; ++step) {
        const auto g = normal_vector(n, 40 + step);
        const std::vector<float> before = residual;
        Message msg;
        const EncodeContext ctx = context(step);
        ef.encode(*c, g, 0, ctx, msg);
        const auto d = decode_dense(*c, msg, n, ctx);
        for (std::size_t i = 0; i < n; ++i) {
          const float expected = g[i] + before[i];
          ASSERT_NEAR(d[i] + residual[i], expected, 1e-5f * (1.0f + std::fabs(expected)))
              << label(cs) << " n " << n << " step " << step << " i " << i;
        }
      }
      if (cs.name != "none" && n > 1) {
        EXPECT_GT(ops::sum_squares(residual.data(), n), 0.0) << label(cs);
      }
    }
  }
}

// Mass conservation holds by construction (the residual is a - D(m) with the codec's own
// decode), so it cannot see a codec that sends the wrong values. These two have no other
// independent CPU check of their decoded values (review, 2026-12-05): randomk must decode the
// input itself at exactly its k positions, one per stratum, and 0 elsewhere; onebit must
// decode +-RMS(a) with the sign of a (a zero decodes to +).
TEST(CompressorProperties, RandomkAndOnebitDecodeTheirDocumentedValues) {
  for (std::size_t n : {1u, 333u, 70001u}) {
    std::vector<float> a = normal_vector(n, 9);
    a[0] = 0.0f;
    const EncodeContext ctx = context(2);
    auto randomk = make("randomk", {{"density", "0.05"}});
    Message msg;
    randomk->encode(a, ctx, msg);
    const auto d = decode_dense(*randomk, msg, n, ctx);
    const auto pos = dynamic_cast<const RandomkCompressor&>(*randomk).positions(n, ctx);
    const std::size_t k = pos.size();
    ASSERT_EQ(k, std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(0.05 * n))));
    std::vector<char> kept(n, 0);
    for (std::size_t j = 0; j < k; ++j) {
      ASSERT_GE(pos[j], j * n / k) << "n " << n << ": position " << j << " outside its stratum";
      ASSERT_LT(pos[j], (j + 1) * n / k) << "n " << n << ": position " << j;
      kept[pos[j]] = 1;
    }
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(d[i], kept[i] ? a[i] : 0.0f) << "randomk n " << n << " i " << i;
    }

    auto onebit = make("onebit", {});
    onebit->encode(a, ctx, msg);
    const auto s = decode_dense(*onebit, msg, n, ctx);
    double sq = 0;
    for (float v : a) sq += static_cast<double>(v) * v;
    const double rms = std::sqrt(sq / static_cast<double>(n));
    for (std::size_t i = 0; i < n; ++i) {
      const double want = a[i] < 0 ? -rms : rms;
      ASSERT_NEAR(s[i], want, 1e-6 * std::max(rms, 1e-30)) << "onebit n " << n << " i " << i;
    }
  }
}

TEST(CompressorProperties, AddModeEqualsSetModePlusOutput) {
  for (const Case& cs : all_cases()) {
    const std::size_t n = 5000;
    auto c = make(cs.name, cs.params);
    const auto a = normal_vector(n, 21);
    Message msg;
    const EncodeContext ctx = context(2);
    c->encode(a, ctx, msg);
    std::vector<float> set(n, 123.0f), add = normal_vector(n, 22);
    const std::vector<float> base = add;
    c->decode(msg, set, 0.5f, DecodeMode::kSet, ctx);
    c->decode(msg, add, 0.5f, DecodeMode::kAdd, ctx);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(add[i], base[i] + set[i], 1e-5f) << label(cs) << " i " << i;
    }
  }
}

TEST(CompressorProperties, EncodingIsDeterministicAcrossThreadCounts) {
  const int saved = max_threads();
  for (const Case& cs : all_cases()) {
    const std::size_t n = 300001;  // large enough for every parallel path
    const auto a = normal_vector(n, 31);
    Message one, two;
    set_num_threads(1);
    make(cs.name, cs.params)->encode(a, context(5), one);
    set_num_threads(2);
    make(cs.name, cs.params)->encode(a, context(5), two);
    EXPECT_EQ(one, two) << label(cs);
  }
  set_num_threads(saved);
}

// The index cost by the documented rule, computed here without the library's helpers.
std::size_t index_bytes(const std::vector<std::uint32_t>& idx, std::size_t n) {
  std::size_t varint = 0;
  long long prev = -1;
  for (std::uint32_t i : idx) {
    unsigned long long gap = static_cast<unsigned long long>(i - prev - 1);
    std::size_t len = 1;
    while (gap >= 128) gap >>= 7, ++len;
    varint += len;
    prev = i;
  }
  return std::min(varint, (n + 7) / 8);
}

std::vector<std::uint32_t> largest(const std::vector<float>& a, std::size_t k) {
  std::vector<std::uint32_t> idx(a.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](auto x, auto y) { return std::fabs(a[x]) > std::fabs(a[y]); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

TEST(CompressorProperties, ByteCountsFollowTheDocumentedFormulas) {
  for (std::size_t n : {1u, 9u, 1000u, 65537u}) {
    const auto a = normal_vector(n, n + 1);
    for (double rho : {0.001, 0.01, 0.1, 0.5, 1.0}) {
      const std::size_t k = std::clamp<std::size_t>(std::llround(rho * n), 1, n);
      const auto idx = largest(a, k);
      const std::string density = std::to_string(rho);
      Message msg;
      make("topk", {{"density", density}})->encode(a, {}, msg);
      EXPECT_EQ(msg.size(), 12 + index_bytes(idx, n) + 4 * k) << "topk " << n << " " << rho;
      make("randomk", {{"density", density}})->encode(a, {}, msg);
      EXPECT_EQ(msg.size(), 4 * k);
      for (int bits : {2, 3, 4, 8}) {
        for (std::size_t block : {8u, 256u}) {
          make("lbs", {{"density", density}, {"bits", std::to_string(bits)},
                       {"block", std::to_string(block)}})->encode(a, {}, msg);
          EXPECT_EQ(msg.size(), 12 + index_bytes(idx, n) + 2 * ceil_div(k, block) +
                                    ceil_div(k * bits, 8))
              << "lbs " << n << " " << rho << " " << bits << " " << block;
        }
      }
    }
    Message msg;
    const EncodeContext ctx = context(0);
    const std::pair<std::string, std::size_t> dense[] = {
        {"none", 4 * n}, {"fp16", 2 * n}, {"bf16", 2 * n},
        {"signsgd", 4 + ceil_div(n, 8)}, {"onebit", 4 + ceil_div(n, 8)},
        {"terngrad", 4 + ceil_div(n, 4)},
        {"blockquant", 2 * ceil_div(n, 256) + ceil_div(4 * n, 8)},
        {"qsgd", 4 * ceil_div(n, 512) + ceil_div(4 * n, 8)}};
    for (const auto& [name, bytes] : dense) {
      auto c = make(name);
      c->encode(a, ctx, msg);
      EXPECT_EQ(msg.size(), bytes) << name << " " << n;
      EXPECT_EQ(c->fixed_message_bytes(n).value(), bytes) << name;
    }
    make("qsgd", {{"levels", "127"}, {"chunk", "64"}})->encode(a, ctx, msg);
    EXPECT_EQ(msg.size(), 4 * ceil_div(n, 64) + n);
  }
}

TEST(CompressorProperties, TopkBlockquantAndLbsAreContractions) {
  const Case cases[] = {{"topk", {{"density", "0.01"}}},
                        {"topk", {{"density", "0.3"}}},
                        {"topk_sampled", {{"density", "0.05"}}},
                        {"blockquant", {{"bits", "2"}}},
                        {"blockquant", {{"bits", "4"}, {"block", "8"}}},
                        {"blockquant", {{"bits", "8"}}},
                        {"lbs", {}},
                        {"lbs", {{"density", "0.1"}, {"bits", "2"}, {"block", "16"}}},
                        {"signsgd", {}}};
  const std::size_t n = 20000;
  for (const Case& cs : cases) {
    auto c = make(cs.name, cs.params);
    const double delta = c->contraction_delta(n);
    ASSERT_GT(delta, 0.0) << label(cs);
    // Gaussian, heavy-tailed, and adversarial (one spike per block, the rest just below a
    // half step) inputs.
    std::vector<std::vector<float>> inputs = {normal_vector(n, 1), normal_vector(n, 2)};
    for (float& x : inputs[1]) x = x * x * x;
    std::vector<float> spiky(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) spiky[i] = (i % 256 == 0) ? 7.0f : 0.49f;
    inputs.push_back(spiky);
    for (const auto& a : inputs) {
      Message msg;
      c->encode(a, context(0), msg);
      const auto d = decode_dense(*c, msg, n, context(0));
      const double err = testing::squared_distance(a, d), norm = testing::squared_norm(a);
      EXPECT_LE(err, (1.0 - delta) * norm) << label(cs) << " delta " << delta;
      EXPECT_LT(err, norm) << label(cs);
    }
  }
  // The documented deltas themselves.
  EXPECT_DOUBLE_EQ(make("topk", {{"density", "0.01"}})->contraction_delta(n), 0.01);
  const double c2 = (1.0 + 1.0 / 1024) * (1.0 + 1.0 / 1024);
  EXPECT_DOUBLE_EQ(make("blockquant")->contraction_delta(n), (1.0 - c2 / 196.0) / 256.0);
  EXPECT_DOUBLE_EQ(make("lbs")->contraction_delta(n), 0.01 * (1.0 - c2 / 196.0) / 256.0);
}

TEST(CompressorProperties, LosslessSettingsRoundTrip) {
  const auto a = normal_vector(4097, 50);
  for (const Case& cs : std::vector<Case>{{"none", {}}, {"topk", {{"density", "1"}}},
                                          {"threshold", {{"threshold", "1e-30"}}}}) {
    Message msg;
    auto c = make(cs.name, cs.params);
    c->encode(a, context(0), msg);
    EXPECT_EQ(decode_dense(*c, msg, a.size(), context(0)), a) << label(cs);
  }
  Message msg;
  auto c = make("fp16");
  EncodeContext ctx = context(0);
  c->encode(a, ctx, msg);
  const auto d = decode_dense(*c, msg, a.size(), ctx);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(d[i], a[i], std::fabs(a[i]) * (1.0f / 2048) + 1e-6f);
  }
}

// Found in review: fp16 cast a finite a / P >= 65520 to Inf, error feedback then stored
// e = a - Inf = -Inf, the next step's a = g + e was -Inf and e NaN, and every later step was
// skipped. The cast saturates (core/half_math.h, clamp_to_half_range, shared with the CUDA
// twin) and the residual keeps the excess. It saturates at half_sum_limit(P), not 65504, so
// that the sum of P saturated messages stays finite (Note [fp16 sums stay finite]).
TEST(CompressorProperties, Fp16SaturatesAndErrorFeedbackKeepsTheExcess) {
  auto c = make("fp16");
  EncodeContext ctx = context(0);
  ctx.world_size = 2;
  const float limit = half_sum_limit(2);
  EXPECT_EQ(limit, 32720.0f);  // the largest half h with 2 h (1 + 2^-11)^2 <= 65504
  std::vector<float> residual(4, 0.0f);
  ErrorFeedback ef(residual);
  const std::vector<float> g = {3.0e5f, -1.0e6f, 1.0f, 65000.0f};
  Message msg;
  ef.encode(*c, g, 0, ctx, msg);
  const std::vector<float> sent = decode_dense(*c, msg, g.size(), ctx);  // P * half(a / P)
  // 65000 / 2 = 32500 is below the limit: rounded to the nearest half (32496), not clamped.
  EXPECT_EQ(sent, (std::vector<float>{2 * limit, -2 * limit, 1.0f, 2 * 32496.0f}));
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_TRUE(std::isfinite(residual[i])) << i;
    EXPECT_EQ(residual[i], g[i] - sent[i]) << i;  // mass conservation
  }
  // The excess goes out over the next steps instead of being lost or turning into NaN.
  const std::vector<float> zero(4, 0.0f);
  for (int step = 1; step < 4; ++step) ef.encode(*c, zero, 0, ctx, msg);
  EXPECT_FLOAT_EQ(residual[0], 3.0e5f - 4 * 2 * limit);  // 3e5 = 4 x 65440 + 38240
  EXPECT_FLOAT_EQ(residual[1], -1.0e6f + 4 * 2 * limit);
  // Non-finite values are not made finite: the non-finite guard must still see them.
  std::vector<float> bad = {std::numeric_limits<float>::infinity(), std::nanf("")};
  c->encode(bad, ctx, msg);
  const std::vector<float> back = decode_dense(*c, msg, bad.size(), ctx);
  EXPECT_TRUE(std::isinf(back[0]));
  EXPECT_TRUE(std::isnan(back[1]));
}

// P copies of the 16-bit message `one` summed with `add` (one rounding per addition) in a chain
// and in a pairwise tree, as the allreduces sum them: {chain, tree}.
template <typename Add>
std::array<std::uint16_t, 2> chain_and_tree_sums(std::uint16_t one, int p, Add add) {
  std::uint16_t chain = one;
  for (int r = 1; r < p; ++r) chain = add(chain, one);
  std::vector<std::uint16_t> tree(static_cast<std::size_t>(p), one);
  while (tree.size() > 1) {
    std::vector<std::uint16_t> next;
    for (std::size_t i = 0; i + 1 < tree.size(); i += 2) next.push_back(add(tree[i], tree[i + 1]));
    if (tree.size() % 2) next.push_back(tree.back());
    tree = std::move(next);
  }
  return {chain, tree[0]};
}

// Note [fp16 sums stay finite]: P messages saturated at half_sum_limit(P), summed in f16 with
// one rounding per addition (as comm/mpi_types.cpp's half_sum_n, in a chain and in a tree),
// stay finite; at 65504 each, two of them summed to Inf and the step was skipped while error
// feedback had taken the mass out of the residual (review, 2026-12-07). And the limit costs
// little: P of them reach at least 85% of 65504.
TEST(CompressorProperties, Fp16MessagesSaturatedByAllRanksSumToAFiniteHalf) {
  const auto add = [](std::uint16_t a, std::uint16_t b) {
    return half_bits_of(float_of_half_bits(a) + float_of_half_bits(b));
  };
  for (const int p : {1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 64, 256}) {
    for (const float sign : {1.0f, -1.0f}) {
      const float limit = half_sum_limit(p);
      const std::uint16_t one = half_bits_of(sign * limit);
      EXPECT_EQ(float_of_half_bits(one), sign * limit) << p;  // a half itself
      for (const std::uint16_t sum : chain_and_tree_sums(one, p, add)) {
        EXPECT_TRUE(std::isfinite(float_of_half_bits(sum))) << p;
        EXPECT_LE(std::fabs(float_of_half_bits(sum)), 65504.0f) << p;
      }
      EXPECT_GE(static_cast<double>(p) * limit, 0.85 * 65504.0) << p;
    }
  }
}

// The bf16 cast had no clamp: a value within 0.2% of FLT_MAX rounded to Inf, and two messages
// of 2^127 summed to it, with the fp16 cast's old consequences (review, 2026-12-07). It
// saturates at bf16_sum_limit(P) (Note [fp16 sums stay finite]), the residual keeping the
// excess, and P saturated messages sum to a finite bf16, chained or in a tree.
TEST(CompressorProperties, Bf16SaturatesAndSumsOfSaturatedMessagesStayFinite) {
  auto c = make("bf16");
  EncodeContext ctx = context(0);
  constexpr float kMax = std::numeric_limits<float>::max();
  for (const int p : {1, 2}) {
    ctx.world_size = p;
    std::vector<float> residual(2, 0.0f);
    ErrorFeedback ef(residual);
    const std::vector<float> g = {kMax, -kMax};
    Message msg;
    ef.encode(*c, g, 0, ctx, msg);
    const std::vector<float> sent = decode_dense(*c, msg, g.size(), ctx);
    for (std::size_t i = 0; i < g.size(); ++i) {
      EXPECT_TRUE(std::isfinite(sent[i]) && std::isfinite(residual[i])) << p << " " << i;
      EXPECT_EQ(sent[i] / static_cast<float>(p), (i == 0 ? 1 : -1) * bf16_sum_limit(p)) << p;
      EXPECT_EQ(residual[i], g[i] - sent[i]) << p << " " << i;  // mass conservation
    }
  }
  EXPECT_EQ(bf16_sum_limit(1), float_of_bf16_bits(0x7f7f));  // the largest finite bf16
  const auto add = [](std::uint16_t a, std::uint16_t b) {    // as comm/mpi_types.cpp sums
    return bf16_bits_of(float_of_bf16_bits(a) + float_of_bf16_bits(b));
  };
  for (const int p : {2, 3, 4, 7, 16, 64, 256}) {
    const std::uint16_t one = bf16_bits_of(bf16_sum_limit(p));
    EXPECT_EQ(float_of_bf16_bits(one), bf16_sum_limit(p)) << p;
    for (const std::uint16_t sum : chain_and_tree_sums(one, p, add)) {
      EXPECT_TRUE(std::isfinite(float_of_bf16_bits(sum))) << p;
    }
    if (p <= 16) EXPECT_GE(static_cast<double>(p) * bf16_sum_limit(p), 0.85 * kMax) << p;
  }
}

}  // namespace
}  // namespace sparq::compress
