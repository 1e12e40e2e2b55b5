// Note [A server residual no server sends] (compress/gradient_exchange.h) on resume: a two_phase
// server residual that no server sends any more is folded into the error-feedback residual, on
// the same world size and on another, or dropped with a warning naming its mass; and a residual
// the checkpoint lacks starts from that fold, said as such. Split from
// elastic_plan_resume_test.cpp, whose helpers it shares (elastic_plan_test_util.h).
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "elastic_plan_test_util.h"

namespace sparq::train {
namespace {

using namespace elastic_plan_testing;  // NOLINT(google-build-using-namespace): the helpers

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

}  // namespace
}  // namespace sparq::train
