// A config built in code (docs/embedding.md) is checked as its YAML would be: compressor values
// that YAML would read otherwise are refused as themselves, an unknown compressor is named by
// compress.name, a strategy that refuses the compressor is refused; a dry run logs nothing.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "common/log_capture.h"
#include "train/run.h"

namespace sparq {
namespace {

train::TrainConfig lbs_with(const std::string& density) {
  train::TrainConfig c = train::default_train_config().value();
  c.compress.compress.name = "lbs";
  c.compress.compress.params = {{"density", density}};
  return c;
}

TEST(InCodeConfig, CompressorValuesAreReadAsThemselves) {
  EXPECT_TRUE(train::validate_train_config(lbs_with("0.05")).is_ok());
  // Written plain into the YAML, "0.1 # note" read back as 0.1, and a line break as YAML
  // structure: "train: set twice" (review, 2026-12-07).
  for (const std::string bad : {"0.1 # note", "0.1\ntrain: {steps: 3}", "[0.1]", "-"}) {
    const auto refused = train::validate_train_config(lbs_with(bad));
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.status().message().find("compress.lbs.density: expected a number"),
              std::string::npos)
        << refused.status().message();
  }
}

// docs/embedding.md: a strategy's accepts() runs whenever a config is read or validated;
// validate passed topk with allreduce, which run_training then refused (review, 2026-12-07).
TEST(InCodeConfig, AStrategyThatRefusesTheCompressorIsRefusedByValidation) {
  train::TrainConfig c = train::default_train_config().value();
  c.compress.compress.name = "topk";
  c.compress.aggregation = "allreduce";
  const auto refused = train::validate_train_config(c);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("compress.aggregation"), std::string::npos)
      << refused.status().message();
  c.compress.aggregation = "auto";
  EXPECT_TRUE(train::validate_train_config(c).is_ok());
  // Every text setting is read as itself: "allgather # x" read back as allgather.
  c.compress.aggregation = "allgather # x";
  EXPECT_FALSE(train::validate_train_config(c).is_ok());
}

TEST(InCodeConfig, AnUnknownCompressorIsNamedByCompressName) {
  train::TrainConfig c = train::default_train_config().value();
  c.compress.compress.name = "nope";
  c.compress.compress.params = {{"density", "0.1"}};
  const auto refused = train::validate_train_config(c);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("compress.name"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("compress.nope.density: unknown key"),
            std::string::npos)
      << refused.status().message();
}

// A CommConfig built in code: an unknown backend was a single process without a word, an
// unknown algorithm or wait the default (review, 2026-12-07).
TEST(InCodeConfig, MakeCommunicatorRefusesUnknownNames) {
  for (const auto& [field, value] : {std::pair<std::string, std::string>{"backend", "bogus"},
                                     {"allreduce", "fast"},
                                     {"mpi_wait", "nap"}}) {
    train::CommConfig c;
    if (field == "backend") c.backend = value;
    if (field == "allreduce") c.allreduce = value;
    if (field == "mpi_wait") c.mpi_wait = value;
    const auto refused = train::make_communicator(c);
    ASSERT_FALSE(refused.is_ok()) << field;
    EXPECT_NE(refused.status().message().find("comm." + field + ": '" + value + "'"),
              std::string::npos)
        << refused.status().message();
  }
  train::CommConfig self;
  self.backend = "self";
  EXPECT_TRUE(train::make_communicator(self).is_ok());
}

// docs/embedding.md: what a dry run prints is returned in dry_run_report, and the library
// prints nothing; every rank logged the model's summary (review, 2026-12-07).
TEST(InCodeConfig, ADryRunLogsNothing) {
  const train::TrainConfig c = train::validate_train_config(lbs_with("0.05")).value();
  auto comm = train::make_communicator(c.comm).value();
  train::RunOptions options;
  options.trainer.dry_run = true;
  testing::LogCapture log;
  auto summary = train::run_training(c, *comm, options);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(log.text(), "");
  EXPECT_NE(summary->dry_run_report.find("parameters in"), std::string::npos);
}

}  // namespace
}  // namespace sparq
