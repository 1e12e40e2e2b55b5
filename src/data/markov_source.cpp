#include "data/markov_source.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"
#include "core/rng.h"
#include "data/sampler.h"

namespace sparq::data {

Status MarkovChain::check_size(const MarkovConfig& config) {
  std::uint64_t contexts = 1;
  for (int i = 0; i < config.order; ++i) {
    contexts *= config.vocab_size;
    if (contexts > kMaxContexts) {
      return Status::error(
          "vocab_size {} and order {} give more than 2^24 contexts; lower one "
          "of them",
          config.vocab_size, config.order);
    }
  }
  if (contexts * static_cast<std::uint64_t>(std::max(config.branching, 0)) > kMaxTableEntries) {
    return Status::error(
        "branching {} for each of {} contexts exceeds the table of 2^26 "
        "successors",
        config.branching, contexts);
  }
  return Status::ok();
}

Result<MarkovChain> MarkovChain::create(const MarkovConfig& config) {
  if (config.vocab_size < 2)
    return Status::error("Markov vocab_size must be >= 2, got {}", config.vocab_size);
  if (config.order < 1) return Status::error("Markov order must be >= 1, got {}", config.order);
  if (config.branching < 1 || static_cast<std::uint32_t>(config.branching) > config.vocab_size) {
    return Status::error("Markov branching must be in [1, {}], got {}", config.vocab_size,
                         config.branching);
  }
  if (!(config.smoothing > 0 && config.smoothing <= 1)) {
    return Status::error("Markov smoothing must be in (0, 1], got {}", config.smoothing);
  }
  SPARQ_RETURN_IF_ERROR(check_size(config).with_context("Markov chain"));
  std::uint64_t contexts = 1;
  for (int i = 0; i < config.order; ++i) contexts *= config.vocab_size;
  const std::size_t b = static_cast<std::size_t>(config.branching);
  MarkovChain m;
  m.config_ = config;
  m.num_contexts_ = contexts;
  m.succ_.resize(contexts * b);
  m.q_.resize(contexts * b);
  // Which tokens a context has drawn already: a table lookup, where a search of the drawn
  // ones cost O(b^2) per context (a chain with wide branching effectively hung, review).
  std::vector<std::uint8_t> drawn(config.vocab_size, 0);
  for (std::uint64_t c = 0; c < contexts; ++c) {
    Rng rng(config.seed, data_stream(DataStream::kMarkovModel, c));
    std::uint32_t* succ = m.succ_.data() + c * b;
    double* q = m.q_.data() + c * b;
    double total = 0;
    for (std::size_t k = 0; k < b; ++k) {
      std::uint32_t y;
      do {  // distinct successors (b <= V, so this terminates)
        y = static_cast<std::uint32_t>(rng.below(config.vocab_size));
      } while (drawn[y] != 0);
      drawn[y] = 1;
      succ[k] = y;
      q[k] = -std::log(
          1.0 - static_cast<double>(rng.uniform()));  // Exp(1): Dirichlet(1) after normalising
      total += q[k];
    }
    // All draws 0 (each is with probability 2^-24: one successor makes it likely over 2^24
    // contexts) left 0/0 = NaN weights and a NaN entropy rate (review, 2026-12-07). Equal
    // weights then; every other chain keeps its draws.
    if (total == 0) {
      for (std::size_t k = 0; k < b; ++k) q[k] = 1.0;
      total = static_cast<double>(b);
    }
    for (std::size_t k = 0; k < b; ++k) q[k] /= total;
    for (std::size_t k = 0; k < b; ++k) drawn[succ[k]] = 0;
  }
  m.compute_stationary();
  // Entropy of each context's distribution, weighted by the stationary distribution.
  const double v = config.vocab_size, eps = config.smoothing, floor_p = eps / v;
  double h = 0;
  for (std::uint64_t c = 0; c < contexts; ++c) {
    double hc = (v - static_cast<double>(b)) * (-floor_p * std::log(floor_p));
    for (std::size_t k = 0; k < b; ++k) {
      const double p = (1 - eps) * m.q_[c * b + k] + floor_p;
      hc -= p * std::log(p);
    }
    h += m.pi_[c] * hc;
  }
  m.entropy_rate_ = h;
  return m;
}

void MarkovChain::compute_stationary() {
  const std::uint64_t s = num_contexts_, v = config_.vocab_size;
  const std::size_t b = static_cast<std::size_t>(config_.branching);
  const double eps = config_.smoothing;
  std::vector<double> pi(s, 1.0 / static_cast<double>(s)), next(s), uniform(s / v);
  residual_ = 1;
  for (int iter = 0; iter < 100000 && residual_ > 1e-12; ++iter) {
    std::fill(next.begin(), next.end(), 0.0);
    std::fill(uniform.begin(), uniform.end(), 0.0);
    for (std::uint64_t c = 0; c < s; ++c) {
      const std::uint64_t base = (c % (s / v)) * v;  // drop the oldest token, shift in y
      const double mass = pi[c];
      uniform[base / v] += mass * eps / static_cast<double>(v);
      for (std::size_t k = 0; k < b; ++k)
        next[base + succ_[c * b + k]] += mass * (1 - eps) * q_[c * b + k];
    }
    double diff = 0, total = 0;
    for (std::uint64_t c = 0; c < s; ++c) {
      next[c] += uniform[c / v];
      total += next[c];
    }
    for (std::uint64_t c = 0; c < s; ++c) {
      next[c] /= total;  // guards against drift of the sum by rounding
      diff += std::abs(next[c] - pi[c]);
    }
    pi.swap(next);
    residual_ = diff;
  }
  pi_ = std::move(pi);
}

std::string MarkovChain::describe() const {
  return fmt::format(
      "Markov chain (vocab {}, order {}, branching {}, smoothing {}, seed {}): entropy rate "
      "{:.6f} nats/token = {:.6f} bits/token (stationary residual {:.1e})",
      config_.vocab_size, config_.order, config_.branching, config_.smoothing, config_.seed,
      entropy_rate_, entropy_rate_bits(), residual_);
}

double MarkovChain::entropy_rate_bits() const { return entropy_rate_ / std::numbers::ln2; }

double MarkovChain::entropy_given_last_nats(int tokens) const {
  SPARQ_CHECK(tokens >= 0, "entropy_given_last_nats({}): a count of tokens", tokens);
  if (tokens >= config_.order) return entropy_rate_;
  // The contexts that share their last `tokens` tokens g are g + m * V^tokens (the newest
  // token is the lowest digit, as probability() encodes contexts); their joint with the next token
  // y is sum_m pi(c) p(y | c), gathered one group at a time in a vector of V.
  const std::uint64_t v = config_.vocab_size;
  std::uint64_t groups = 1;
  for (int i = 0; i < tokens; ++i) groups *= v;
  const std::size_t b = static_cast<std::size_t>(config_.branching);
  const double eps = config_.smoothing;
  std::vector<double> joint(v);
  double h = 0;
  for (std::uint64_t g = 0; g < groups; ++g) {
    std::fill(joint.begin(), joint.end(), 0.0);
    double mass = 0;
    for (std::uint64_t c = g; c < num_contexts_; c += groups) {
      mass += pi_[c];
      for (std::size_t k = 0; k < b; ++k)
        joint[succ_[c * b + k]] += pi_[c] * (1 - eps) * q_[c * b + k];
    }
    if (mass <= 0) continue;
    for (std::uint64_t y = 0; y < v; ++y) {
      const double p = joint[y] + mass * eps / static_cast<double>(v);
      h -= p * std::log(p / mass);
    }
  }
  return h;
}

double MarkovChain::row_loss_bound_nats(std::int64_t seq_len) const {
  SPARQ_CHECK(seq_len >= 1, "row_loss_bound_nats({}): rows hold at least one target", seq_len);
  // Note [A row's achievable loss] (markov_source.h).
  double sum = 0;
  for (std::int64_t i = 0; i < seq_len; ++i) {
    if (i + 1 >= config_.order) {
      sum += static_cast<double>(seq_len - i) * entropy_rate_;
      break;
    }
    sum += entropy_given_last_nats(static_cast<int>(i + 1));
  }
  return sum / static_cast<double>(seq_len);
}

double MarkovChain::probability(std::uint64_t context, std::uint32_t token) const {
  const std::size_t b = static_cast<std::size_t>(config_.branching);
  double p = config_.smoothing / config_.vocab_size;
  for (std::size_t k = 0; k < b; ++k) {
    if (succ_[context * b + k] == token) p += (1 - config_.smoothing) * q_[context * b + k];
  }
  return p;
}

double MarkovChain::log_loss_sum(std::span<const std::int32_t> inputs,
                                 std::span<const std::int32_t> targets, std::int32_t ignore,
                                 std::int64_t* count) const {
  SPARQ_CHECK(config_.order == 1, "log_loss_sum needs an order-1 chain, this one has order {}",
              config_.order);
  SPARQ_CHECK(inputs.size() == targets.size(), "{} inputs but {} targets", inputs.size(),
              targets.size());
  double sum = 0;
  std::int64_t n = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] == ignore) continue;
    sum -= std::log(probability(static_cast<std::uint64_t>(inputs[i]),
                                static_cast<std::uint32_t>(targets[i])));
    ++n;
  }
  if (count) *count = n;
  return sum;
}

std::uint64_t MarkovChain::advance(std::uint64_t context, std::uint32_t token) const {
  return (context % (num_contexts_ / config_.vocab_size)) * config_.vocab_size + token;
}

std::vector<std::uint32_t> MarkovChain::generate(std::uint64_t count, std::uint32_t stream) const {
  std::vector<std::uint32_t> out(count);
  MarkovSampler(*this, stream).fill(out);
  return out;
}

MarkovSampler::MarkovSampler(const MarkovChain& chain, std::uint32_t stream)
    : chain_(&chain), rng_(chain.config_.seed, data_stream(DataStream::kMarkov, stream)) {
  // Initial context from the stationary distribution, by inversion.
  const double u = unit();
  double acc = 0;
  context_ = chain.num_contexts_ - 1;
  for (std::uint64_t c = 0; c < chain.num_contexts_; ++c) {
    acc += chain.pi_[c];
    if (u < acc) {
      context_ = c;
      break;
    }
  }
}

// 53-bit uniforms, so sampling follows p to double precision.
double MarkovSampler::unit() { return static_cast<double>(rng_.next_u64() >> 11) * 0x1p-53; }

void MarkovSampler::fill(std::span<std::uint32_t> out) {
  const MarkovChain& m = *chain_;
  const std::size_t b = static_cast<std::size_t>(m.config_.branching);
  for (std::uint32_t& token : out) {
    std::uint32_t y;
    if (unit() < m.config_.smoothing) {
      y = static_cast<std::uint32_t>(rng_.below(m.config_.vocab_size));
    } else {
      const double r = unit();
      double cum = 0;
      std::size_t k = 0;
      for (; k + 1 < b; ++k) {
        cum += m.q_[context_ * b + k];
        if (r < cum) break;
      }
      y = m.succ_[context_ * b + k];
    }
    token = y;
    context_ = m.advance(context_, y);
  }
}

}  // namespace sparq::data
