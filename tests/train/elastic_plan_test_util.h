// Helpers of the tests of resumes under another comm.plan: auto choice (elastic_plan_resume_test,
// elastic_server_residual_test): a one-layer GPT-2 tiny whose bucket choice the test makes, and
// checkpoint files read, edited and widened from one rank's to two ranks'.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/fresh_dir.h"
#include "common/log_capture.h"
#include "core/check.h"
#include "train/checkpoint.h"
#include "train/checkpoint_layout.h"
#include "train/trainer.h"

namespace sparq::train::elastic_plan_testing {

using sparq::testing::fresh_dir;
using sparq::testing::LogCapture;

// GPT-2 tiny with one layer, several buckets; comm.plan: auto whose choice the test makes.
constexpr char kConfig[] = R"(
model: {preset: gpt2-tiny, vocab_size: 64, n_ctx: 16, n_layer: 1}
data: {source: markov, seq_len: 16, markov: {vocab_size: 64, train_tokens: 8192, eval_tokens: 1024}}
optim: {name: adamw, lr: 1.0e-3}
compress: {name: topk, topk: {density: 0.1}}
comm: {first_bucket_mb: 0.1, bucket_mb: 0.25, dense_patterns: ["*.bias", "*ln_*"], plan: auto,
       plan_profile: profiles/h100_node.yaml, plan_network: 400gbit}
train: {micro_batch: 2, eval_batches: 1, eval_interval: 0, checkpoint_interval: 2, seed: 5,
        steps: 2}
log: {progress_interval: 0}
)";

// The choice for compressed-region bucket b ("dense", a strategy, or "" for the default).
using Choice = std::function<std::string(std::size_t)>;

inline std::unique_ptr<Trainer> make_trainer(const std::string& root,
                                             const std::vector<std::string>& set,
                                             const Choice& choice, comm::Communicator& self) {
  std::vector<std::string> overrides = {"train.checkpoint_dir=" + root};
  overrides.insert(overrides.end(), set.begin(), set.end());
  auto config = parse_train_config(kConfig, "elastic_plan_resume_test", overrides);
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  Trainer::Options options;
  options.plan_buckets = [choice](const TrainConfig&, const comm::BucketPlan& plan,
                                  int) -> Result<BucketChoice> {
    BucketChoice out;
    for (const comm::Bucket& b : plan.buckets()) {
      out.choice.push_back(b.dense ? "" : choice(static_cast<std::size_t>(b.index)));
      out.report.push_back(fmt::format("bucket {}: {}", b.index, out.choice.back()));
    }
    return out;
  };
  auto trainer = Trainer::create(*config, self, options);
  SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
  return std::move(trainer).value();
}

// The buckets the plan leaves to comm.plan: auto's choice (not dense by the layout).
inline std::vector<std::size_t> choosable_buckets(comm::Communicator& self) {
  std::vector<std::size_t> out;
  make_trainer(
      fresh_dir("probe"), {},
      [&out](std::size_t b) {
        out.push_back(b);
        return "allgather";
      },
      self);
  return out;
}

inline std::vector<float> floats(const CheckpointFile& f, const std::string& name) {
  auto bytes = f.section(name);
  SPARQ_CHECK(bytes.is_ok(), "{}", bytes.status().message());
  std::vector<float> out(bytes->size() / 4);
  SPARQ_CHECK(f.read_floats(name, out).is_ok(), "{}", name);
  return out;
}

inline void set_floats(CheckpointFile& f, const std::string& name, const std::vector<float>& v) {
  for (auto& [n, bytes] : f.sections) {
    if (n == name) bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  }
}

inline CheckpointFile read(const std::string& dir, int rank) {
  auto f = read_checkpoint_file(checkpoint_rank_file(dir, rank));
  SPARQ_CHECK(f.is_ok(), "{}", f.status().message());
  return std::move(f).value();
}

// The old world's state: rank r's residual e_r (zero outside the compressed buckets) and the
// bucket-long two_phase server residual s of each two_phase bucket, of which old rank r owns
// region r. Dyadic, so that (e_0 + e_1) / 2 + s is exact in f32.
inline float residual_value(int r, std::size_t i) {
  return r == 0 ? std::ldexp(static_cast<float>(i % 13) - 6.0f, -4)
                : std::ldexp(static_cast<float>(i % 7) - 3.0f, -5);
}
inline float server_value(std::size_t i) {
  return std::ldexp(static_cast<float>(i % 5) - 2.0f, -6);
}

// Rewrites the one-rank checkpoint `dir` as one of two ranks with the state above.
inline void widen_to_two_ranks(const std::string& dir) {
  const CheckpointFile one = read(dir, 0);
  const BucketRanges buckets = *parse_bucket_ranges(one.meta.at("buckets"), "test");
  const std::vector<std::string> kinds = saved_aggregations(one);
  for (int r = 0; r < 2; ++r) {
    CheckpointFile f = one;
    f.meta["world_size"] = "2";
    f.meta["rank"] = std::to_string(r);
    if (f.has_section("residual")) {
      std::vector<float> e(floats(one, "residual").size(), 0.0f);
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        if (kinds[b] == "none") continue;
        for (std::size_t i = buckets[b].first; i < buckets[b].first + buckets[b].second; ++i) {
          e[i] = residual_value(r, i);
        }
      }
      set_floats(f, "residual", e);
    }
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      if (kinds[b] != "two_phase") continue;
      const std::size_t n = buckets[b].second, begin = n * r / 2, end = n * (r + 1) / 2;
      std::vector<float> region;
      for (std::size_t i = begin; i < end; ++i) region.push_back(server_value(i));
      set_floats(f, fmt::format("exchange/bucket{}.aggregator", b), region);
    }
    ASSERT_TRUE(write_checkpoint_file(checkpoint_rank_file(dir, r), f).is_ok());
  }
  ASSERT_TRUE(mark_complete(dir, 2).is_ok());
}

struct Resumed {
  Status status;
  std::string log;
  CheckpointFile saved;  // the state right after the resume, as this run saves it
};

inline Resumed resume_and_save(const std::string& root, const std::string& from,
                               const std::vector<std::string>& set, const Choice& choice,
                               comm::Communicator& self) {
  Resumed out;
  LogCapture log;
  auto trainer = make_trainer(root, set, choice, self);
  out.status = trainer->resume(from);
  out.log = log.text();
  if (!out.status.is_ok()) return out;
  SPARQ_CHECK(trainer->save_checkpoint().is_ok(), "saving the resumed state");
  out.saved = read(checkpoint_dir(root, trainer->step()), 0);
  return out;
}

// The step-2 checkpoint of a one-rank run under `root` whose plan sends every compressed
// bucket by two_phase (widen_to_two_ranks makes it a two-rank one).
inline std::string two_phase_checkpoint(const std::string& root, comm::Communicator& self) {
  SPARQ_CHECK(make_trainer(
                  root, {}, [](std::size_t) { return "two_phase"; }, self)
                  ->run()
                  .is_ok(),
              "training the two_phase run under {}", root);
  return checkpoint_dir(root, 2);
}

}  // namespace sparq::train::elastic_plan_testing
