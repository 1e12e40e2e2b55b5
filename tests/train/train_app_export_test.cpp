// apps/train's --export-safetensors to standard output: the summary line that follows the
// export went to standard output too, after the export's bytes, and the file no longer loaded
// ("the tensors cover 3337216 bytes of data but the file holds 3337404": review, 2026-12-07).
// The summary goes to standard error then; the bytes are the export to a file, byte for byte.
// The same for log.metrics to standard output.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/file_io.h"
#include "train_app_util.h"

namespace sparq::testing {
namespace {

namespace fs = std::filesystem;

TEST(TrainAppExport, ToStandardOutputHoldsTheExportAlone) {
  const fs::path dir = scratch_dir("train_app_export", "stdout");
  const std::string run =
      std::string("cd ") + SPARQ_SOURCE_DIR + " && OMP_NUM_THREADS=1 " + SPARQ_TRAIN_APP +
      " --config configs/default.yaml --set train.steps=2 --set optim.warmup_steps=1 "
      "--set model.n_layer=1 --set train.eval_batches=1 "
      "--set log.progress_interval=0 --set log.metrics= --export-safetensors ";
  const fs::path file = dir / "file.safetensors", piped = dir / "stdout.safetensors";
  const ProcessResult to_file = run_command(run + file.string() + " 2>&1");
  ASSERT_EQ(to_file.exit_code, 0) << to_file.output;
  EXPECT_NE(to_file.output.find("parameters checksum"), std::string::npos) << to_file.output;
  const ProcessResult to_stdout =
      run_command(run + "/dev/stdout > " + piped.string() + " 2> " + (dir / "log").string());
  ASSERT_EQ(to_stdout.exit_code, 0);
  auto expected = read_file(file.string()), got = read_file(piped.string());
  ASSERT_TRUE(expected.is_ok() && got.is_ok());
  EXPECT_EQ(got->size(), expected->size());
  EXPECT_TRUE(*got == *expected) << "the export to standard output differs from the file's";
  auto log = read_file((dir / "log").string());
  ASSERT_TRUE(log.is_ok());
  EXPECT_NE(log->find("parameters checksum"), std::string::npos) << *log;
  fs::remove_all(dir);
}

// log.metrics to standard output (documented as supported): the summary line went into the
// JSONL stream, which then failed a JSONL reader (review, 2026-12-07).
TEST(TrainAppExport, MetricsToStandardOutputHoldTheRecordsAlone) {
  const fs::path dir = scratch_dir("train_app_export", "metrics_stdout");
  const fs::path records = dir / "records.jsonl", log = dir / "log";
  const ProcessResult run = run_command(
      std::string("cd ") + SPARQ_SOURCE_DIR + " && OMP_NUM_THREADS=1 " + SPARQ_TRAIN_APP +
      " --config configs/default.yaml --set train.steps=2 --set optim.warmup_steps=1 "
      "--set model.n_layer=1 --set train.eval_batches=1 --set log.progress_interval=0 "
      "--set log.metrics=/dev/stdout > " +
      records.string() + " 2> " + log.string());
  ASSERT_EQ(run.exit_code, 0);
  auto text = read_file(records.string());
  ASSERT_TRUE(text.is_ok());
  std::size_t lines = 0;
  for (std::size_t pos = 0; pos < text->size(); ++lines) {
    const std::size_t end = text->find('\n', pos);
    ASSERT_NE(end, std::string::npos) << "an unterminated last line";
    EXPECT_EQ(text->substr(pos, 10), "{\"event\":\"") << text->substr(pos, end - pos);
    pos = end + 1;
  }
  EXPECT_GE(lines, 4u);  // 2 steps, the evaluation, the end
  auto said = read_file(log.string());
  ASSERT_TRUE(said.is_ok());
  EXPECT_NE(said->find("parameters checksum"), std::string::npos) << *said;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sparq::testing
