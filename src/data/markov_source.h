// A synthetic text source with a known optimum: a random Markov chain of configurable order
// over a vocabulary, whose exact entropy rate is computed so that a language model's loss
// (cross-entropy in nats per token) can be compared with the best achievable value.
//
// Model: the context is the previous `order` tokens (V^order contexts). For each context,
// `branching` distinct successor tokens get Dirichlet(1) weights q drawn from the seed; the
// transition probability is p(y | c) = (1 - smoothing) q(y | c) + smoothing / V, so every
// context can follow every other one (the chain is irreducible and aperiodic when
// smoothing > 0).
// Entropy rate: H = sum_c pi(c) H(p(. | c)) with pi the stationary distribution over
// contexts, found by power iteration to a residual below 1e-12 (reported).
// generate() starts from a context drawn from pi, so the stream is stationary from token 0.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"

namespace sparq::data {

struct MarkovConfig {
  std::uint32_t vocab_size = 256;
  int order = 1;
  int branching = 8;
  double smoothing = 0.05;
  std::uint64_t seed = 0;
};

class MarkovChain {
 public:
  // Fails for a vocab < 2, order < 1, more than 2^24 contexts, branching outside [1, V], or
  // smoothing outside (0, 1].
  static Result<MarkovChain> create(const MarkovConfig& config);
  // Whether the chain's tables fit kMaxContexts and kMaxTableEntries (create() checks it; the
  // trainer's config reader too, to name the keys before start-up).
  static Status check_size(const MarkovConfig& config);

  double entropy_rate_nats() const { return entropy_rate_; }
  double entropy_rate_bits() const;
  // H(next token | the last `tokens` tokens) in nats, for a stationary stream: the entropy
  // rate for tokens >= order, more below it (the older context is unknown and averaged
  // over). Costs one pass over the successor table per call below the order.
  double entropy_given_last_nats(int tokens) const;
  // Note [A row's achievable loss]
  // The lowest expected loss of a causal model that reads rows of `seq_len` tokens cut from
  // the stream at arbitrary positions (the LM loader's windows): target i of a row has the
  // i + 1 tokens before it as context, so for order k the first k - 1 targets see fewer than
  // k tokens and cannot reach the entropy rate. The mean over the row of
  // entropy_given_last_nats(min(i + 1, k)); the entropy rate itself for order 1. It was
  // reported as the entropy rate for every order, so a perfect order-2 model read as some
  // percent "above the optimum" (review, 2026-12-06).
  double row_loss_bound_nats(std::int64_t seq_len) const;
  // Limits of create(): contexts (vocab_size^order) and table entries (contexts * branching,
  // 12 bytes each: 768 MiB at the limit).
  static constexpr std::uint64_t kMaxContexts = std::uint64_t{1} << 24;
  static constexpr std::uint64_t kMaxTableEntries = std::uint64_t{1} << 26;

  double stationary_residual() const { return residual_; }  // L1 change of the last iteration
  std::uint64_t num_contexts() const { return num_contexts_; }
  const std::vector<double>& stationary() const { return pi_; }
  const MarkovConfig& config() const { return config_; }

  // p(token | context), where context = sum_i x_i V^(order-1-i) over the last tokens x.
  double probability(std::uint64_t context, std::uint32_t token) const;
  // Successor context after emitting token from context.
  std::uint64_t advance(std::uint64_t context, std::uint32_t token) const;

  // The true model's loss on next-token pairs: the sum of -ln p(targets[i] | inputs[i]) over
  // the i with targets[i] != ignore, and their number in *count if given. Order 1 only (the
  // context of a pair is its input token); `inputs`, `targets` the same length, ids below the
  // vocabulary.
  // The entropy rate is this loss's expectation; on a finite sample it differs by sampling
  // noise, which is what evaluation reports it for (Trainer::evaluate).
  double log_loss_sum(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                      std::int32_t ignore, std::int64_t* count = nullptr) const;

  // One line for logs: the configuration and the entropy rate in nats and bits per token.
  std::string describe() const;

  // `count` tokens from stream `stream` (different streams give independent samples).
  std::vector<std::uint32_t> generate(std::uint64_t count, std::uint32_t stream) const;

 private:
  friend class MarkovSampler;
  MarkovChain() = default;
  void compute_stationary();

  MarkovConfig config_;
  std::uint64_t num_contexts_ = 0;
  std::vector<std::uint32_t> succ_;  // num_contexts * branching successor tokens
  std::vector<double> q_;            // their Dirichlet weights (sum 1 per context)
  std::vector<double> pi_;
  double entropy_rate_ = 0;
  double residual_ = 0;
};

// The tokens of generate(count, stream) a piece at a time, in constant memory: fill() calls
// of any sizes adding up to count give exactly generate(count, stream) (prepare_data
// --markov-tokens streams shards of any size through it). Borrows the chain.
class MarkovSampler {
 public:
  MarkovSampler(const MarkovChain& chain, std::uint32_t stream);
  void fill(std::span<std::uint32_t> out);

 private:
  double unit();  // a 53-bit uniform in [0, 1)

  const MarkovChain* chain_;
  Rng rng_;
  std::uint64_t context_ = 0;
};

}  // namespace sparq::data
