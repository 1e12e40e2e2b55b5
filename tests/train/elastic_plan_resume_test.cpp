// Resumes under another comm.plan: auto choice, in one process (review, 2026-12-06). The old
// world's checkpoint is written by one rank and widened to two ranks' files with chosen
// residuals and two_phase server residuals (dyadic values, so that every mean and sum is exact),
// then resumed on one rank whose plan sends some buckets otherwise: Note [Mass the new plan
// does not carry] (train/elastic_resume.h). Also: state whose existence a setting decides that
// may change on resume (compress.error_feedback, optim.momentum) starts from zeros; a two_phase
// server residual that no server sends any more is folded (Note [A server residual no server
// sends]); a same-world resume whose plan compresses other buckets is refused naming
// comm.plan_*; and powersgd's errors name its key as the config spells it.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/fresh_dir.h"
#include "common/log_capture.h"
#include "compress/powersgd.h"
#include "core/check.h"
#include "train/checkpoint.h"
#include "train/checkpoint_layout.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

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

std::unique_ptr<Trainer> make_trainer(const std::string& root, const std::vector<std::string>& set,
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
std::vector<std::size_t> choosable_buckets(comm::Communicator& self) {
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

std::vector<float> floats(const CheckpointFile& f, const std::string& name) {
  auto bytes = f.section(name);
  SPARQ_CHECK(bytes.is_ok(), "{}", bytes.status().message());
  std::vector<float> out(bytes->size() / 4);
  SPARQ_CHECK(f.read_floats(name, out).is_ok(), "{}", name);
  return out;
}

void set_floats(CheckpointFile& f, const std::string& name, const std::vector<float>& v) {
  for (auto& [n, bytes] : f.sections) {
    if (n == name) bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  }
}

CheckpointFile read(const std::string& dir, int rank) {
  auto f = read_checkpoint_file(checkpoint_rank_file(dir, rank));
  SPARQ_CHECK(f.is_ok(), "{}", f.status().message());
  return std::move(f).value();
}

// The old world's state: rank r's residual e_r (zero outside the compressed buckets) and the
// bucket-long two_phase server residual s of each two_phase bucket, of which old rank r owns
// region r. Dyadic, so that (e_0 + e_1) / 2 + s is exact in f32.
float residual_value(int r, std::size_t i) {
  return r == 0 ? std::ldexp(static_cast<float>(i % 13) - 6.0f, -4)
                : std::ldexp(static_cast<float>(i % 7) - 3.0f, -5);
}
float server_value(std::size_t i) { return std::ldexp(static_cast<float>(i % 5) - 2.0f, -6); }

// Rewrites the one-rank checkpoint `dir` as one of two ranks with the state above.
void widen_to_two_ranks(const std::string& dir) {
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

Resumed resume_and_save(const std::string& root, const std::string& from,
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
std::string two_phase_checkpoint(const std::string& root, comm::Communicator& self) {
  SPARQ_CHECK(make_trainer(
                  root, {}, [](std::size_t) { return "two_phase"; }, self)
                  ->run()
                  .is_ok(),
              "training the two_phase run under {}", root);
  return checkpoint_dir(root, 2);
}

// 2 -> 1 ranks, two_phase everywhere before; here bucket X goes through allgather, bucket Y
// dense, the rest two_phase. X's residual must be e' = mean(e) + s exactly (the server residual
// is mass the average still owes), Y's is dropped with a warning naming it and its mass, the
// two_phase buckets keep mean(e) and s re-partitioned. Before: X lost s with a warning naming
// allgather, and Y kept mean(e), re-saved forever and never applied.
TEST(ElasticPlan, MassThePlanNoLongerCarriesIsFoldedOrDroppedWithAWarning) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const std::string step2 = two_phase_checkpoint(fresh_dir("old"), *self);
  const CheckpointFile one = read(step2, 0);
  const BucketRanges buckets = *parse_bucket_ranges(one.meta.at("buckets"), "test");
  std::vector<std::size_t> compressed;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    if (saved_aggregations(one)[b] == "two_phase") compressed.push_back(b);
  }
  ASSERT_GE(compressed.size(), 3u);
  const std::size_t x = compressed[0], y = compressed[1];
  widen_to_two_ranks(step2);

  const Resumed r = resume_and_save(
      fresh_dir("new"), step2, {},
      [&](std::size_t b) { return b == x   ? "allgather"
                                  : b == y ? "dense"
                                           : "two_phase"; }, *self);
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  const std::vector<float> e = floats(r.saved, "residual");
  double y_mass = 0;
  for (std::size_t b : compressed) {
    for (std::size_t i = buckets[b].first; i < buckets[b].first + buckets[b].second; ++i) {
      const double mean = (static_cast<double>(residual_value(0, i)) + residual_value(1, i)) / 2;
      const double s = server_value(i - buckets[b].first);
      const double want = b == x ? mean + s : b == y ? 0.0 : mean;
      if (b == y) y_mass += std::fabs(mean + s);
      ASSERT_EQ(static_cast<double>(e[i]), want) << "bucket " << b << " at " << i;
    }
  }
  // The two_phase buckets' server residuals: the old regions, concatenated (one new rank).
  const std::vector<float> s =
      floats(r.saved, fmt::format("exchange/bucket{}.aggregator", compressed[2]));
  ASSERT_EQ(s.size(), buckets[compressed[2]].second);
  for (std::size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s[i], server_value(i)) << i;

  EXPECT_EQ(r.log.find("allgather aggregator state reset"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find(fmt::format("two_phase aggregator state folded into the residual "
                                   "(bucket(s) {} not aggregated by two_phase here)",
                                   x)),
            std::string::npos)
      << r.log;
  EXPECT_NE(r.log.find(fmt::format("the error-feedback residual of bucket {} (sum |e| = {:.6g}) "
                                   "is dropped, never applied",
                                   y, y_mass)),
            std::string::npos)
      << r.log;
  EXPECT_EQ(r.log.find("residual mass kept (mean of 2),"), std::string::npos) << r.log;
}

// The merge's warnings (state dropped or reset) are logged once every rank agreed to resume,
// as the same-world load's are: a resume refused after the merge logged them, then failed
// (review, 2026-12-06).
TEST(ElasticPlan, ARefusedElasticResumeLogsNoneOfTheMergesWarnings) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const std::string step2 = two_phase_checkpoint(fresh_dir("old_refused"), *self);
  widen_to_two_ranks(step2);
  const auto dense_first = [](std::size_t b) { return b == 0 ? "dense" : "two_phase"; };
  // Intact, the merge drops the dense bucket's residual with a warning.
  const Resumed intact = resume_and_save(fresh_dir("new_intact"), step2, {}, dense_first, *self);
  ASSERT_TRUE(intact.status.is_ok()) << intact.status.message();
  ASSERT_NE(intact.log.find("is dropped, never applied"), std::string::npos) << intact.log;
  // Damaged after the merge (a counter that is not a number): refused, and silent about it.
  CheckpointFile f = read(step2, 0);
  f.meta["nonfinite_in_a_row"] = "x";
  ASSERT_TRUE(write_checkpoint_file(checkpoint_rank_file(step2, 0), f).is_ok());
  const Resumed refused = resume_and_save(fresh_dir("new_refused"), step2, {}, dense_first, *self);
  ASSERT_FALSE(refused.status.is_ok());
  EXPECT_NE(refused.status.message().find("nonfinite_in_a_row"), std::string::npos)
      << refused.status.message();
  EXPECT_EQ(refused.log.find("is dropped"), std::string::npos) << refused.log;
}

// Settings that decide whether state exists may change on resume (docs/reliability.md): a
// checkpoint without error feedback and without SGD momentum resumes with both, on another
// world size too; both start from zeros with a warning naming the setting. It was refused:
// "checkpoint '...' has no section 'residual'".
TEST(ElasticPlan, StateTheCheckpointDoesNotHoldStartsFromZeros) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const auto allgather = [](std::size_t) { return "allgather"; };
  const std::vector<std::string> before = {"compress.error_feedback=false", "optim.name=sgd",
                                           "optim.momentum=0"};
  const std::vector<std::string> after = {"compress.error_feedback=true", "optim.name=sgd",
                                          "optim.momentum=0.9"};
  const std::string root = fresh_dir("old");
  ASSERT_TRUE(make_trainer(root, before, allgather, *self)->run().is_ok());
  const std::string step2 = checkpoint_dir(root, 2);
  ASSERT_FALSE(read(step2, 0).has_section("residual"));
  for (bool elastic : {false, true}) {
    SCOPED_TRACE(elastic ? "2 -> 1 ranks" : "1 -> 1 rank");
    if (elastic) widen_to_two_ranks(step2);
    const Resumed r =
        resume_and_save(fresh_dir(elastic ? "elastic" : "same"), step2, after, allgather, *self);
    ASSERT_TRUE(r.status.is_ok()) << r.status.message();
    for (const char* name : {"residual", "optim/sgd.momentum"}) {
      for (float v : floats(r.saved, name)) ASSERT_EQ(v, 0.0f) << name;
    }
    EXPECT_NE(r.log.find("holds no error-feedback residual (compress.error_feedback: false -> "
                         "true): it starts from zeros"),
              std::string::npos)
        << r.log;
    EXPECT_NE(r.log.find("holds no optimizer state 'sgd.momentum' (optim.momentum: 0 -> 0.9)"),
              std::string::npos)
        << r.log;
  }
}

// The same world size under another plan choice (another comm.plan_network): refused naming
// the bucket and the settings, where it failed with "compression state: expected
// 'bucket1.compressor', found ...".
TEST(ElasticPlan, SameWorldWithOtherBucketKindsIsRefusedNamingThePlan) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const std::string root = fresh_dir("old");
  ASSERT_TRUE(make_trainer(
                  root, {}, [](std::size_t) { return "allgather"; }, *self)
                  ->run()
                  .is_ok());
  const std::string step2 = checkpoint_dir(root, 2);
  const std::vector<std::string> kinds = saved_aggregations(read(step2, 0));
  std::size_t y = 0;
  while (y < kinds.size() && kinds[y] == "none") ++y;
  ASSERT_LT(y, kinds.size());
  const Resumed r = resume_and_save(
      fresh_dir("new"), step2, {"comm.plan_network=10gbit"},
      [&](std::size_t b) { return b == y ? "dense" : "allgather"; }, *self);
  ASSERT_FALSE(r.status.is_ok());
  for (const std::string& phrase :
       {fmt::format("bucket {}: compressed (allgather) there, sent dense here", y),
        std::string("comm.plan_profile, comm.plan_network"),
        std::string("changed here: comm.plan_network: 400gbit -> 10gbit")}) {
    EXPECT_NE(r.status.message().find(phrase), std::string::npos) << phrase << "\n"
                                                                  << r.status.message();
  }
}

// A same-world checkpoint whose residual holds mass in a bucket it sends dense (written by an
// elastic resume before Note [Mass the new plan does not carry]): the mass is dropped with the
// warning, not kept and saved again forever.
TEST(ElasticPlan, SameWorldResidualInADenseBucketIsDropped) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const std::string root = fresh_dir("old");
  const std::size_t y = choosable_buckets(*self).at(0);
  const auto y_dense = [y](std::size_t b) { return b == y ? "dense" : "allgather"; };
  ASSERT_TRUE(make_trainer(root, {}, y_dense, *self)->run().is_ok());
  const std::string step2 = checkpoint_dir(root, 2);
  CheckpointFile f = read(step2, 0);
  ASSERT_EQ(saved_aggregations(f).at(y), "none");
  const auto [offset, count] = parse_bucket_ranges(f.meta.at("buckets"), "test")->at(y);
  std::vector<float> e = floats(f, "residual");
  for (std::size_t i = offset; i < offset + count; ++i) e[i] = 0.5f;
  set_floats(f, "residual", e);
  ASSERT_TRUE(write_checkpoint_file(checkpoint_rank_file(step2, 0), f).is_ok());
  const Resumed r = resume_and_save(fresh_dir("new"), step2, {}, y_dense, *self);
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  const std::vector<float> kept = floats(r.saved, "residual");
  for (std::size_t i = offset; i < offset + count; ++i) ASSERT_EQ(kept[i], 0.0f) << i;
  EXPECT_NE(r.log.find(fmt::format("the error-feedback residual of bucket {} (sum |e| = {:.6g})", y,
                                   0.5 * static_cast<double>(count))),
            std::string::npos)
      << r.log;
}

// Note [A server residual no server sends] (compress/gradient_exchange.h): a two_phase run with
// server compression, resumed with it off on the same world size and on another. Its server
// residual s is folded into the error-feedback residual (e + s; mean(e) + s), and dropped with
// a warning naming its mass without error feedback. It was loaded, never sent, and saved again
// at every checkpoint.
TEST(ElasticPlan, ServerResidualWithoutServerCompressionIsFolded) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const auto two_phase = [](std::size_t) { return "two_phase"; };
  const std::string root = fresh_dir("old");
  ASSERT_TRUE(make_trainer(root, {}, two_phase, *self)->run().is_ok());
  const std::string step2 = checkpoint_dir(root, 2);
  CheckpointFile f = read(step2, 0);
  const BucketRanges buckets = *parse_bucket_ranges(f.meta.at("buckets"), "test");
  std::vector<std::size_t> compressed;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    if (saved_aggregations(f)[b] == "two_phase") compressed.push_back(b);
  }
  ASSERT_FALSE(compressed.empty());
  // One rank: its region is the whole bucket.
  std::vector<float> e = floats(f, "residual");
  double mass = 0;
  for (std::size_t b : compressed) {
    std::vector<float> s;
    for (std::size_t i = 0; i < buckets[b].second; ++i) {
      s.push_back(server_value(i));
      mass += std::fabs(s.back());
      e[buckets[b].first + i] = residual_value(0, buckets[b].first + i);
    }
    set_floats(f, fmt::format("exchange/bucket{}.aggregator", b), s);
  }
  set_floats(f, "residual", e);
  ASSERT_TRUE(write_checkpoint_file(checkpoint_rank_file(step2, 0), f).is_ok());
  const std::string off = "compress.server_compression=false";
  for (bool elastic : {false, true}) {
    SCOPED_TRACE(elastic ? "2 -> 1 ranks" : "1 -> 1 rank");
    if (elastic) widen_to_two_ranks(step2);
    const Resumed r = resume_and_save(fresh_dir("new"), step2, {off}, two_phase, *self);
    ASSERT_TRUE(r.status.is_ok()) << r.status.message();
    const std::vector<float> kept = floats(r.saved, "residual");
    for (std::size_t b : compressed) {
      ASSERT_TRUE(floats(r.saved, fmt::format("exchange/bucket{}.aggregator", b)).empty()) << b;
      for (std::size_t i = buckets[b].first; i < buckets[b].first + buckets[b].second; ++i) {
        const float s = server_value(i - buckets[b].first);
        const double want =
            elastic ? (static_cast<double>(residual_value(0, i)) + residual_value(1, i)) / 2 + s
                    : static_cast<double>(residual_value(0, i) + s);
        ASSERT_EQ(static_cast<double>(kept[i]), want) << "bucket " << b << " at " << i;
      }
    }
    EXPECT_NE(r.log.find(fmt::format("two_phase server residual of bucket(s) {} (sum |s| = "
                                     "{:.6g}) is folded into the error-feedback residual",
                                     fmt::join(compressed, ", "), mass)),
              std::string::npos)
        << r.log;
  }
  const Resumed r = resume_and_save(fresh_dir("no_ef"), step2,
                                    {off, "compress.error_feedback=false"}, two_phase, *self);
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_NE(r.log.find(fmt::format("two_phase server residual of bucket(s) {} (sum |s| = {:.6g}) "
                                   "is dropped, never applied",
                                   fmt::join(compressed, ", "), mass)),
            std::string::npos)
      << r.log;
}

// A run without error feedback saves no residual, but its two_phase servers keep theirs: resumed
// with error feedback on and server compression off, the residual starts from the folded server
// residual. The log said "it starts from zeros" next to the fold's line (review, 2026-12-08).
TEST(ElasticPlan, AResidualSavedWithoutErrorFeedbackStartsFromTheFoldedServerResidual) {
  std::unique_ptr<comm::Communicator> self = comm::make_self_communicator();
  const auto two_phase = [](std::size_t) { return "two_phase"; };
  const std::string root = fresh_dir("no_ef_old");
  ASSERT_TRUE(
      make_trainer(root, {"compress.error_feedback=false"}, two_phase, *self)->run().is_ok());
  const std::string step2 = checkpoint_dir(root, 2);
  CheckpointFile f = read(step2, 0);
  ASSERT_FALSE(f.has_section("residual"));
  // Server residuals not all zero (one rank: its region is the whole bucket), as
  // ServerResidualWithoutServerCompressionIsFolded writes them.
  const BucketRanges buckets = *parse_bucket_ranges(f.meta.at("buckets"), "test");
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    if (saved_aggregations(f)[b] != "two_phase") continue;
    std::vector<float> server(buckets[b].second);
    for (std::size_t i = 0; i < server.size(); ++i) server[i] = server_value(i);
    set_floats(f, fmt::format("exchange/bucket{}.aggregator", b), server);
  }
  ASSERT_TRUE(write_checkpoint_file(checkpoint_rank_file(step2, 0), f).is_ok());
  for (bool elastic : {false, true}) {
    SCOPED_TRACE(elastic ? "2 -> 1 ranks" : "1 -> 1 rank");
    if (elastic) widen_to_two_ranks(step2);
    const Resumed r = resume_and_save(fresh_dir("new"), step2,
                                      {"compress.server_compression=false"}, two_phase, *self);
    ASSERT_TRUE(r.status.is_ok()) << r.status.message();
    EXPECT_NE(r.log.find("holds no error-feedback residual (compress.error_feedback: false -> "
                         "true): it starts from the two_phase server residual folded into it"),
              std::string::npos)
        << r.log;
    EXPECT_EQ(r.log.find("it starts from zeros"), std::string::npos) << r.log;
    if (elastic) {
      EXPECT_NE(r.log.find("residual mass started from zeros (not in the checkpoint), then took "
                           "the two_phase server residual"),
                std::string::npos)
          << r.log;
    }
  }
}

TEST(ElasticPlan, PowerSgdNamesItsRankKeyAsTheConfigDoes) {
  compress::PowerSgdCompressor c({});
  // Rank 4 (the default) above min(2, 3000) of a tensor large enough to be compressed.
  const Status s = c.set_layout(6000, {{"w", 0, 2, 3000}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("compress.powersgd.rank"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sparq::train
