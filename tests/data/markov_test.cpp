#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "data/markov_source.h"

namespace sparq::data {
namespace {

TEST(MarkovChain, TransitionRowsAreDistributionsAndPiIsStationary) {
  for (int order : {1, 2}) {
    MarkovConfig config;
    config.vocab_size = 12, config.order = order, config.branching = 3, config.seed = 5;
    auto m = MarkovChain::create(config);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_LT(m->stationary_residual(), 1e-12);
    std::vector<double> next(m->num_contexts(), 0.0);
    for (std::uint64_t c = 0; c < m->num_contexts(); ++c) {
      double row = 0;
      for (std::uint32_t y = 0; y < 12; ++y) {
        row += m->probability(c, y);
        next[m->advance(c, y)] += m->stationary()[c] * m->probability(c, y);
      }
      EXPECT_NEAR(row, 1.0, 1e-12);
    }
    for (std::uint64_t c = 0; c < m->num_contexts(); ++c)
      EXPECT_NEAR(next[c], m->stationary()[c], 1e-12);
    // The entropy rate recomputed from the public probabilities.
    double h = 0;
    for (std::uint64_t c = 0; c < m->num_contexts(); ++c) {
      for (std::uint32_t y = 0; y < 12; ++y)
        h -= m->stationary()[c] * m->probability(c, y) * std::log(m->probability(c, y));
    }
    EXPECT_NEAR(m->entropy_rate_nats(), h, 1e-10);
    EXPECT_NEAR(m->entropy_rate_bits(), h / std::log(2.0), 1e-10);
  }
}

TEST(MarkovChain, SampledTextHasTheComputedEntropyRate) {
  MarkovConfig config;
  config.vocab_size = 64, config.order = 2, config.branching = 4, config.smoothing = 0.02,
  config.seed = 1;
  auto m = MarkovChain::create(config).value();
  const auto tokens = m.generate(400000, 0);
  std::uint64_t context = 0;
  for (int i = 0; i < 2; ++i) context = m.advance(context, tokens[i]);
  double nll = 0;
  for (std::size_t i = 2; i < tokens.size(); ++i) {
    nll -= std::log(m.probability(context, tokens[i]));
    context = m.advance(context, tokens[i]);
  }
  nll /= static_cast<double>(tokens.size() - 2);
  // The per-token NLL has a standard deviation of about 1 nat: the mean is within ~0.01.
  EXPECT_NEAR(nll, m.entropy_rate_nats(), 0.02);
  EXPECT_LT(m.entropy_rate_nats(), std::log(64.0));  // well below a uniform model
  EXPECT_NE(m.generate(100, 1), std::vector<std::uint32_t>(tokens.begin(), tokens.begin() + 100));
  EXPECT_EQ(m.generate(100, 0), std::vector<std::uint32_t>(tokens.begin(), tokens.begin() + 100));
}

// prepare_data --markov-tokens streams shards through MarkovSampler: pieces of any sizes give
// exactly generate()'s tokens.
TEST(MarkovChain, TheSamplerInPiecesGivesGeneratesTokens) {
  MarkovConfig config;
  config.vocab_size = 40, config.order = 2, config.branching = 3, config.seed = 9;
  auto m = MarkovChain::create(config).value();
  for (std::uint32_t stream : {0u, 1u}) {
    const std::vector<std::uint32_t> whole = m.generate(10007, stream);
    MarkovSampler sampler(m, stream);
    std::vector<std::uint32_t> pieces;
    for (std::size_t size : {0u, 1u, 7u, 4096u, 5903u}) {
      std::vector<std::uint32_t> piece(size);
      sampler.fill(piece);
      pieces.insert(pieces.end(), piece.begin(), piece.end());
    }
    EXPECT_EQ(pieces, whole) << "stream " << stream;
  }
}

TEST(MarkovChain, UniformChainHasLogVEntropy) {
  MarkovConfig config;
  config.vocab_size = 10, config.smoothing = 1.0;  // every transition uniform
  auto m = MarkovChain::create(config).value();
  EXPECT_NEAR(m.entropy_rate_nats(), std::log(10.0), 1e-12);
  EXPECT_NE(m.describe().find("entropy rate 2.302585 nats/token"), std::string::npos)
      << m.describe();
}

// The true model's loss on a sample (what evaluation reports as the source's own loss):
// ln V exactly for a uniform chain, ignored targets left out of sum and count; on a long
// order-1 sample, the entropy rate within sampling noise; refused for order 2.
TEST(MarkovChain, LogLossSumScoresPairsUnderTheTrueModel) {
  MarkovConfig uniform;
  uniform.vocab_size = 10, uniform.smoothing = 1.0;
  const auto u = MarkovChain::create(uniform).value();
  const std::vector<std::int32_t> in = {0, 3, 9, 9, 4}, out = {3, 9, -100, 4, 1};
  std::int64_t n = -1;
  EXPECT_NEAR(u.log_loss_sum(in, out, -100, &n), 4 * std::log(10.0), 1e-12);
  EXPECT_EQ(n, 4);

  MarkovConfig config;
  config.vocab_size = 64, config.branching = 4, config.smoothing = 0.02, config.seed = 3;
  const auto m = MarkovChain::create(config).value();
  const auto tokens = m.generate(300001, 0);
  std::vector<std::int32_t> inputs(tokens.begin(), tokens.end() - 1);
  std::vector<std::int32_t> targets(tokens.begin() + 1, tokens.end());
  const double mean = m.log_loss_sum(inputs, targets, -100, &n) / static_cast<double>(n);
  EXPECT_EQ(n, 300000);
  EXPECT_NEAR(mean, m.entropy_rate_nats(), 0.02);
  // Hand-made: the first pair's own probability.
  EXPECT_DOUBLE_EQ(m.log_loss_sum({&inputs[0], 1}, {&targets[0], 1}, -100, &n),
                   -std::log(m.probability(static_cast<std::uint64_t>(inputs[0]),
                                           static_cast<std::uint32_t>(targets[0]))));

  config.order = 2;
  const auto m2 = MarkovChain::create(config).value();
  EXPECT_DEATH(m2.log_loss_sum(in, out, -100, &n), "order-1");
}

TEST(MarkovChain, BadConfigurationsAreClearErrors) {
  MarkovConfig config;
  config.vocab_size = 1;
  EXPECT_NE(MarkovChain::create(config).status().message().find("vocab_size"), std::string::npos);
  config = MarkovConfig{};
  config.order = 4;  // 256^4 contexts
  EXPECT_NE(MarkovChain::create(config).status().message().find("2^24"), std::string::npos);
  config = MarkovConfig{};
  config.branching = 300;
  EXPECT_FALSE(MarkovChain::create(config).is_ok());
  config = MarkovConfig{};
  config.smoothing = 0;
  EXPECT_FALSE(MarkovChain::create(config).is_ok());
}

}  // namespace
}  // namespace sparq::data
