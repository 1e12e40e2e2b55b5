// run_training's export after a stop: with a checkpoint folder the checkpoint holds the step
// and nothing is exported; without one the export is the run's only output, and is written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "train/run.h"
#include "train/safetensors.h"

namespace sparq {
namespace {

TEST(RunOptions, AStopWithoutACheckpointFolderStillExports) {
  train::TrainConfig config = train::default_train_config().value();
  config.train.steps = 6;
  config.train.eval_batches = 1;
  config = train::validate_train_config(config).value();
  const std::string dir = ::testing::TempDir() + "/stop_export_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto comm = train::make_communicator(config.comm).value();
  for (const bool checkpoints : {false, true}) {
    SCOPED_TRACE(checkpoints ? "with train.checkpoint_dir" : "without train.checkpoint_dir");
    train::TrainConfig c = config;
    if (checkpoints) c.train.checkpoint_dir = dir + "/ckpt";
    c = train::validate_train_config(c).value();
    train::RunOptions options;
    options.export_safetensors = dir + (checkpoints ? "/with.safetensors" : "/without.safetensors");
    int requested = 0;
    options.trainer.on_step = [&](const train::StepMetrics& m) {
      if (m.step() == 2) requested = SIGTERM;
    };
    options.trainer.stop_requested = [&] { return requested; };
    auto summary = train::run_training(c, *comm, options);
    ASSERT_TRUE(summary.is_ok()) << summary.status().message();
    ASSERT_EQ(summary->stop_signal, SIGTERM);
    ASSERT_EQ(summary->steps, 2);
    // Without a folder the trained parameters were lost with the process (review, 2026-12-07).
    EXPECT_EQ(std::filesystem::exists(options.export_safetensors), !checkpoints);
    if (!checkpoints) {
      auto file = train::SafetensorsFile::read(options.export_safetensors);
      ASSERT_TRUE(file.is_ok()) << file.status().message();
      EXPECT_EQ(file->metadata().at("step"), "2");
    }
  }
  // Stopped before any step: nothing to export, and an earlier run's file stays as it was.
  train::RunOptions at_once;
  at_once.export_safetensors = dir + "/without.safetensors";
  const auto before = std::filesystem::last_write_time(at_once.export_safetensors);
  at_once.trainer.stop_requested = [] { return SIGTERM; };
  auto stopped = train::run_training(config, *comm, at_once);
  ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
  EXPECT_EQ(stopped->steps_run, 0);
  EXPECT_EQ(std::filesystem::last_write_time(at_once.export_safetensors), before);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sparq
