// Note [Outputs never overwrite inputs] (train/output_paths.h): an output of the run that
// names one of its inputs, or another output, is refused before any file is opened, and the
// input is left as it was.
#include "train/output_paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "data/shard.h"
#include "train/run.h"

namespace sparq::train {
namespace {

namespace fs = std::filesystem;

// A fresh folder of this test's own, with the files named in it.
std::string folder(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/output_paths_" + std::to_string(::getpid()) + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string message(const Status& s) { return s.is_ok() ? "(ok)" : s.message(); }

TEST(OutputPaths, AnOutputNamingAnInputIsRefusedByPathLinkOrHardLink) {
  const std::string dir = folder("inputs");
  TrainConfig c;
  c.origin = dir + "/job.yaml";
  c.train.init_from = dir + "/weights.safetensors";
  ASSERT_TRUE(write_file_atomic(c.origin, "train: {steps: 2}\n").is_ok());
  ASSERT_TRUE(write_file_atomic(c.train.init_from, "weights").is_ok());
  fs::create_symlink(c.origin, dir + "/link.yaml");
  fs::create_hard_link(c.train.init_from, dir + "/hard.safetensors");

  c.log.metrics_path = dir + "/link.yaml";
  Status s = check_outputs_spare_inputs(c, "");
  EXPECT_NE(message(s).find("log.metrics '" + dir +
                            "/link.yaml' is a file the run reads (the "
                            "config file '" +
                            c.origin + "')"),
            std::string::npos)
      << message(s);
  c.log.metrics_path = "";
  s = check_outputs_spare_inputs(c, dir + "/hard.safetensors");
  EXPECT_NE(message(s).find("(train.init_from '" + c.train.init_from + "')"), std::string::npos)
      << message(s);
  c.log.trace_path = dir + "/../inputs/weights.safetensors";  // another spelling of the path
  s = check_outputs_spare_inputs(c, "");
  EXPECT_NE(message(s).find("log.trace"), std::string::npos) << message(s);
  c.log.trace_path = dir + "/trace.json";
  EXPECT_TRUE(check_outputs_spare_inputs(c, dir + "/export.safetensors").is_ok());
  // A link to a file not written yet is that file: the export replaced the metrics written
  // through it.
  fs::create_symlink(dir + "/export2.safetensors", dir + "/dangling.jsonl");
  c.log.metrics_path = dir + "/dangling.jsonl";
  s = check_outputs_spare_inputs(c, dir + "/export2.safetensors");
  EXPECT_NE(message(s).find("name the same file"), std::string::npos) << message(s);
}

TEST(OutputPaths, AFileInADataFolderAndTwoOutputsOnOneFileAreRefused) {
  const std::string dir = folder("cifar");
  TrainConfig c;
  c.data.source = "cifar10";
  c.data.train_path = dir;
  ASSERT_TRUE(write_file_atomic(dir + "/test_batch.bin", "x").is_ok());
  c.log.metrics_path = dir + "/test_batch.bin";
  Status s = check_outputs_spare_inputs(c, "");
  EXPECT_NE(message(s).find("(data.train '" + dir + "': its file '" + dir + "/test_batch.bin')"),
            std::string::npos)
      << message(s);
  // Other files in the folder are not read: a metrics file kept there is fine (it refused the
  // run's own resume).
  c.log.metrics_path = dir + "/metrics.jsonl";
  ASSERT_TRUE(write_file_atomic(c.log.metrics_path, "{}\n").is_ok());
  EXPECT_TRUE(check_outputs_spare_inputs(c, "").is_ok());
  // Neither exists yet: the same path, spelt two ways.
  const std::string out = folder("outputs");
  c.log.metrics_path = out + "/m.jsonl";
  c.log.trace_path = out + "/./m.jsonl";
  s = check_outputs_spare_inputs(c, "");
  EXPECT_NE(message(s).find("log.metrics '" + out + "/m.jsonl' and log.trace '" + out +
                            "/./m.jsonl' name the same file"),
            std::string::npos)
      << message(s);
  // Streams are written in place and never compared.
  c.log.metrics_path = "/dev/stdout";
  c.log.trace_path = "/dev/stdout";
  EXPECT_TRUE(check_outputs_spare_inputs(c, "").is_ok());
}

// Through run_training: a metrics path that named the training shard truncated it at start-up
// (the run then died of SIGBUS); now the run is refused and the shard is unchanged.
TEST(OutputPaths, RunTrainingRefusesBeforeWritingAndTheShardIsUnchanged) {
  const std::string dir = folder("run");
  TrainConfig c = default_train_config().value();
  c.train.steps = 2;
  c.train.eval_batches = 1;
  c.data.source = "shard";
  c.data.train_path = dir + "/train.bin";
  std::vector<std::uint32_t> tokens(20000);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::uint32_t>(i * 7 % c.model.vocab_size);
  }
  ASSERT_TRUE(data::write_shard(c.data.train_path, "gpt2",
                                static_cast<std::uint32_t>(c.model.vocab_size), tokens, 1)
                  .is_ok());
  const std::string before = *read_file(c.data.train_path);
  c.log.metrics_path = c.data.train_path;
  auto comm = make_communicator(c.comm).value();
  auto refused = run_training(c, *comm, {});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("is a file the run reads (data.train"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(*read_file(c.data.train_path) == before) << "the shard was changed";
}

}  // namespace
}  // namespace sparq::train
