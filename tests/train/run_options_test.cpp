// run_training() refuses before any step what used to fail later or not at all (review,
// 2026-12-05): a dry run with stop_at or an export (dropped without a word), a malformed
// SPARQ_FAULT (which aborted the process at the first step of an embedder's run), a
// checkpoint directory that cannot be made (found at the final save), and a VGG batch norm
// that would see one value per channel (2026-12-06: an abort at the first step); and a
// config edited in code after it was loaded or validated (2026-12-07).
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/log_capture.h"
#include "compress/aggregation.h"
#include "train/checkpoint.h"
#include "train/run.h"

namespace sparq {
namespace {

train::TrainConfig tiny_config() {
  train::TrainConfig c = train::default_train_config().value();
  c.train.steps = 2;
  c.train.eval_batches = 1;
  return train::validate_train_config(c).value();
}

TEST(RunOptions, ADryRunRefusesStopAtAndAnExport) {
  const train::TrainConfig config = tiny_config();
  auto comm = train::make_communicator(config.comm).value();
  train::RunOptions options;
  options.trainer.dry_run = true;
  options.stop_at = 1;
  auto refused = train::run_training(config, *comm, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(),
            "a dry run trains and writes nothing: stop_at does not apply");
  options.stop_at = -1;
  options.export_safetensors = ::testing::TempDir() + "/never.safetensors";
  refused = train::run_training(config, *comm, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("export_safetensors does not apply"),
            std::string::npos);
}

// A dry run's report is returned, not printed by the library (it went to stdout, and the
// summary was a 0-step run's: review, 2026-12-07).
TEST(RunOptions, ADryRunReturnsItsReportAndPrintsNothing) {
  const train::TrainConfig config = tiny_config();
  auto comm = train::make_communicator(config.comm).value();
  train::RunOptions options;
  options.trainer.dry_run = true;
  ::testing::internal::CaptureStdout();
  auto summary = train::run_training(config, *comm, options);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(printed.find("resolved config"), std::string::npos) << printed;  // log lines only
  EXPECT_EQ(summary->dry_run_report.rfind("# resolved config (", 0), 0u) << summary->dry_run_report;
  EXPECT_NE(summary->dry_run_report.find("bucket plan:"), std::string::npos);
  EXPECT_TRUE(summary->dry_run_report.ends_with("dry run: configuration valid, nothing trained\n"))
      << summary->dry_run_report;
}

// In a child process: SPARQ_FAULT is read once per process.
TEST(RunOptions, AMalformedFaultSpecIsAStatusNotAnAbort) {
  EXPECT_EXIT(
      {
        ::setenv("SPARQ_FAULT", "gradient.nonfinit", 1);
        const train::TrainConfig config = tiny_config();
        auto comm = train::make_communicator(config.comm).value();
        auto refused = train::run_training(config, *comm, {});
        const bool named = !refused.is_ok() && refused.status().message().find(
                                                   "gradient.nonfinit") != std::string::npos;
        std::exit(named ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// An export path that cannot be written was found after the whole run (and without
// checkpoints the weights were lost; review, 2026-12-06): now before the first step.
TEST(RunOptions, AnExportPathThatCannotBeWrittenIsRefusedBeforeAnyStep) {
  const train::TrainConfig config = tiny_config();
  auto comm = train::make_communicator(config.comm).value();
  train::RunOptions options;
  int steps = 0;
  options.trainer.on_step = [&](const train::StepMetrics&) { ++steps; };
  options.export_safetensors = ::testing::TempDir() + "/no_such_folder/x.safetensors";
  auto refused = train::run_training(config, *comm, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("no_such_folder' does not exist"), std::string::npos)
      << refused.status().message();
  options.export_safetensors = ::testing::TempDir();
  refused = train::run_training(config, *comm, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("is a folder, not a file name"), std::string::npos)
      << refused.status().message();
  // Through a symbolic link, the folder the file goes to (core/output_file.h).
  const std::string link = ::testing::TempDir() + "/export_link_" + std::to_string(::getpid());
  std::filesystem::remove(link);
  std::filesystem::create_symlink(::testing::TempDir() + "/no_such_folder/x.safetensors", link);
  options.export_safetensors = link;
  refused = train::run_training(config, *comm, options);
  std::filesystem::remove(link);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("', a link to '"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(steps, 0);
}

// A VGG conv stage on a 1x1 map with micro-batches of one image gives its batch norm one value
// per channel: the first step aborted the process (review, 2026-12-06). Refused before any
// step, naming the stage and the keys; two images train.
TEST(RunOptions, AVggBatchNormOfOneValuePerChannelIsRefusedBeforeAnyStep) {
  const std::string yaml =
      "model: {preset: vgg-tiny, layout: '16,M,16,M,16,M,16,M,16,M,16'}\n"
      "data: {source: synthetic_images, synthetic: {train_images: 16, eval_images: 4}}\n"
      "optim: {name: sgd, lr: 0.01}\n"
      "train: {steps: 1, eval_batches: 1}\nlog: {progress_interval: 0}\n";
  for (const int micro_batch : {1, 2}) {
    auto config = train::parse_train_config(yaml, "vgg_one_pixel",
                                            {"train.micro_batch=" + std::to_string(micro_batch)});
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    auto comm = train::make_communicator(config->comm).value();
    auto run = train::run_training(*config, *comm, {});
    if (micro_batch == 2) {
      EXPECT_TRUE(run.is_ok()) << run.status().message();
      continue;
    }
    ASSERT_FALSE(run.is_ok());
    EXPECT_NE(run.status().message().find(
                  "features.5.bn would normalise one value per channel (1 image(s) of 1x1): "
                  "training batch norm needs more; raise train.micro_batch"),
              std::string::npos)
        << run.status().message();
  }
}

// Attention dropout's draws per step (models/model.h): refused by the config itself, not only
// by make_model, which a dry run calls for one row (review, 2026-12-07).
TEST(RunOptions, AttentionDropoutPastItsDrawsIsAConfigError) {
  const std::string yaml =
      "model: {preset: gpt2-tiny, n_layer: 1, n_ctx: 65536, n_embd: 64, n_head: 16, "
      "attn_dropout: 0.1}\n"
      "data: {seq_len: 65536}\ntrain: {micro_batch: 16}\n";
  auto refused = train::parse_train_config(yaml, "long_context", {});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("long_context: gpt2-tiny n_layer=1 n_ctx=65536"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find(
                "attn_dropout 0.1 over micro_batch 16 x n_head 16 x seq_len 65536^2"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(train::parse_train_config(yaml, "long_context", {"train.micro_batch=15"}).is_ok());
}

// A checkpoint directory that cannot be made was found at the end of the run, whose trained
// weights were then lost with the trainer (review, 2026-12-05): now before the first step. And
// before log.metrics is opened: the refused run emptied the metrics of the run before it
// (review, 2026-12-07).
TEST(RunOptions, ACheckpointDirThatCannotBeMadeIsRefusedBeforeAnyStep) {
  train::TrainConfig config = tiny_config();
  config.train.checkpoint_dir = "/proc/sparq_cannot_be_made/checkpoints";
  config.log.metrics_path =
      ::testing::TempDir() + "/refused_run_" + std::to_string(::getpid()) + "_metrics.jsonl";
  std::ofstream(config.log.metrics_path) << "{\"event\":\"step\",\"step\":1}\n";
  config = train::validate_train_config(config).value();
  auto comm = train::make_communicator(config.comm).value();
  int steps = 0;
  train::RunOptions options;
  options.trainer.on_step = [&](const train::StepMetrics&) { ++steps; };
  auto refused = train::run_training(config, *comm, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(steps, 0);
  EXPECT_NE(refused.status().message().find("train.checkpoint_dir: cannot create "
                                            "'/proc/sparq_cannot_be_made/checkpoints'"),
            std::string::npos)
      << refused.status().message();
  std::ifstream kept(config.log.metrics_path);
  std::string line;
  EXPECT_TRUE(std::getline(kept, line)) << "the earlier run's metrics were emptied";
  EXPECT_EQ(line, "{\"event\":\"step\",\"step\":1}");
  std::filesystem::remove(config.log.metrics_path);
}

// A communication task that throws ends the job through the fatal handler (MPI_Abort under
// MPI), as a failed Status does. It unwound out of the trainer instead: this rank died alone
// by std::terminate, and its peers waited in the step's last collective until comm.timeout_s
// (review, 2026-12-06).
class ThrowingAggregator final : public compress::Aggregator {
 public:
  std::string_view name() const override { return "test_throwing"; }
  Status run(std::span<float>, compress::Compressor&, compress::ErrorFeedback*, comm::Communicator&,
             const compress::EncodeContext&) override {
    throw std::runtime_error("the aggregator threw");
  }
};

TEST(RunOptionsDeathTest, ACommunicationTaskThatThrowsEndsTheJob) {
  static const Status registered = compress::register_aggregation(
      {"test_throwing", "throws from run()", {}, [](const compress::AggregatorOptions&) {
         return std::unique_ptr<compress::Aggregator>(std::make_unique<ThrowingAggregator>());
       }});
  ASSERT_TRUE(registered.is_ok()) << registered.message();
  train::TrainConfig config = train::default_train_config().value();
  config.train.steps = 2;
  config.compress.compress.name = "topk";
  config.compress.compress.params = {{"density", "0.1"}};
  config.compress.aggregation = "test_throwing";
  config = train::validate_train_config(config).value();
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        auto comm = train::make_communicator(config.comm).value();
        (void)train::run_training(config, *comm);
      },
      "communication failed: .*the aggregator threw");
}

// A stop asked during a step that ends with a periodic evaluation skips it and saves the step:
// the evaluation ran in full first, and a short grace period before SIGKILL lost the save
// (review, 2026-12-07).
TEST(RunOptions, AStopDuringAnEvaluatingStepSavesWithoutEvaluating) {
  train::TrainConfig config = tiny_config();
  config.train.steps = 6;
  config.train.eval_interval = 2;
  config.train.checkpoint_dir =
      ::testing::TempDir() + "/stop_before_eval_" + std::to_string(::getpid());
  config.train.checkpoint_interval = 2;
  config = train::validate_train_config(config).value();
  auto comm = train::make_communicator(config.comm).value();
  train::RunOptions options;
  int requested = 0, evals = 0;
  options.trainer.on_step = [&](const train::StepMetrics& m) {
    if (m.step() == 4) requested = SIGTERM;
  };
  options.trainer.on_eval = [&](const train::EvalMetrics&) { ++evals; };
  options.trainer.stop_requested = [&] { return requested; };
  auto summary = train::run_training(config, *comm, options);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->stop_signal, SIGTERM);
  EXPECT_EQ(summary->steps, 4);
  EXPECT_EQ(evals, 1);  // step 2's, not step 4's
  EXPECT_EQ(summary->saved_step, 4);
  // The resume runs step 4's evaluation first: it was never run, and the study tool dropped
  // that step from the curves (review, 2026-12-07). Then the final one, at step 6.
  std::vector<std::int64_t> evaluated;
  train::RunOptions resumed;
  resumed.resume = config.train.checkpoint_dir;
  resumed.trainer.on_eval = [&](const train::EvalMetrics& e) { evaluated.push_back(e.step); };
  ASSERT_TRUE(train::run_training(config, *comm, resumed).is_ok());
  EXPECT_EQ(evaluated, (std::vector<std::int64_t>{4, 6}));
  // A resume from a step whose evaluation ran (step 2, saved before it) does not run it again.
  evaluated.clear();
  resumed.resume = train::checkpoint_dir(config.train.checkpoint_dir, 2);
  resumed.stop_at = 3;
  ASSERT_TRUE(train::run_training(config, *comm, resumed).is_ok());
  EXPECT_TRUE(evaluated.empty()) << evaluated.front();
  std::filesystem::remove_all(config.train.checkpoint_dir);
}

// A run stopped inside the trace window wrote nothing for it, and a run resumed inside it
// logged the whole window while it holds only its own steps (review, 2026-12-07).
TEST(RunOptions, ATraceWindowCutByAStopOrAResumeSaysWhichStepsItHolds) {
  train::TrainConfig config = tiny_config();
  const std::string dir = ::testing::TempDir() + "/trace_cut_" + std::to_string(::getpid());
  config.train.steps = 6;
  config.train.checkpoint_dir = dir + "/ckpt";
  config.train.checkpoint_interval = 1;
  config.log.trace_path = dir + "/t.json";
  config.log.trace_start = 1;  // steps 2..4
  config.log.trace_steps = 3;
  config.log.progress_interval = 10;  // the first and last steps of each run only
  config = train::validate_train_config(config).value();
  auto comm = train::make_communicator(config.comm).value();
  train::RunOptions options;
  options.stop_at = 3;
  {
    testing::LogCapture log;
    ASSERT_TRUE(train::run_training(config, *comm, options).is_ok());
    EXPECT_NE(log.text().find("wrote trace of steps 2..3 to " + config.log.trace_path),
              std::string::npos)
        << log.text();
    EXPECT_NE(log.text().find("the run ended before steps 4..4"), std::string::npos) << log.text();
    EXPECT_TRUE(std::filesystem::exists(config.log.trace_path));
  }
  // Past train.steps, --stop-at is said to change nothing; it was ignored without a word. And
  // a resumed run's first step has its progress line, as a fresh run's (review, 2026-12-07).
  options.stop_at = 7;
  options.resume = config.train.checkpoint_dir;
  testing::LogCapture log;
  ASSERT_TRUE(train::run_training(config, *comm, options).is_ok());
  EXPECT_NE(log.text().find("--stop-at 7 is past train.steps 6: the run ends at step 6"),
            std::string::npos)
      << log.text();
  EXPECT_NE(log.text().find("step 4/6"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("wrote trace of steps 4..4 to " + config.log.trace_path +
                            " (open in ui.perfetto.dev); steps 2..3 ran before the resume at "
                            "step 3 and are not in it"),
            std::string::npos)
      << log.text();
  std::filesystem::remove_all(dir);
}

// Trainer::train_step() (benchmarks drive the loop themselves) now keeps run()'s limit on
// non-finite steps in a row; it stepped on without one (review, 2026-12-07).
TEST(RunOptions, TrainStepEndsTheJobAfterTooManyNonFiniteSteps) {
  train::TrainConfig config = tiny_config();
  config.schedule.lr = 1e30;  // the first step's parameters overflow; the next gradients are NaN
  config.clip_norm = 0;
  config.train.max_nonfinite_in_a_row = 2;
  config = train::validate_train_config(config).value();
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        auto comm = train::make_communicator(config.comm).value();
        auto trainer = train::Trainer::create(config, *comm).value();
        for (int s = 0; s < 10; ++s) (void)trainer->train_step();
      },
      "the gradient was not finite in 2 steps in a row \\(train.max_nonfinite_in_a_row = 2\\)");
}

// A loaded config edited in code: the error names the edit and the --set keys, where it blamed
// the file, which holds no such value (review, 2026-12-07).
TEST(RunOptions, AnErrorInALoadedConfigEditedInCodeSaysSo) {
  const std::string file = std::string(SPARQ_SOURCE_DIR) + "/configs/default.yaml";
  train::TrainConfig config = train::load_train_config(file, {"train.steps=50"}).value();
  config.schedule.lr = -1;
  auto refused = train::validate_train_config(config);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message().rfind(
                file + " with --set train.steps, edited in code: optim.lr: must be >= 0", 0),
            0u)
      << refused.status().message();
  config.schedule.lr = 0.01;
  auto accepted = train::validate_train_config(config);
  ASSERT_TRUE(accepted.is_ok()) << accepted.status().message();
  EXPECT_EQ(accepted->origin, file);  // still the file it was read from
}

// Fields derived from others (the schedule's end, the plan's isolated tensors) edited after
// validation reached the trainer unchecked, as effective_yaml does not write them: the
// trainer sets them from what they follow (review, 2026-12-07).
TEST(RunOptions, DerivedFieldsEditedInCodeFollowWhatTheyDeriveFrom) {
  train::TrainConfig config = train::default_train_config().value();
  config.train.steps = 4;
  config.train.eval_batches = 1;
  config.schedule.kind = "cosine";
  config = train::validate_train_config(config).value();
  const auto lrs = [](const train::TrainConfig& c) {
    std::vector<double> seen;
    train::RunOptions options;
    options.trainer.on_step = [&](const train::StepMetrics& m) { seen.push_back(m.result.lr); };
    auto comm = train::make_communicator(c.comm).value();
    EXPECT_TRUE(train::run_training(c, *comm, options).is_ok());
    return seen;
  };
  const std::vector<double> want = lrs(config);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_LT(want[3], 0.5 * want[0]);  // decayed over the 4 steps
  train::TrainConfig edited = config;
  edited.schedule.total_steps = 1000;
  edited.comm.plan.isolated = {"wte"};
  EXPECT_EQ(lrs(edited), want);
}

// A resume from an earlier step (a branch: train.steps changed) left the abandoned history's
// steps, evaluation and end record in log.metrics, read back as the run's (review,
// 2026-12-07): the file now goes on from the resumed step, the records past it kept beside it.
TEST(RunOptions, AResumeFromAnEarlierStepContinuesTheMetricsFromThere) {
  const std::string dir = ::testing::TempDir() + "/branch_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  train::TrainConfig config = tiny_config();
  config.train.steps = 6;
  config.train.eval_interval = 2;
  config.train.checkpoint_dir = dir + "/ckpt";
  config.train.checkpoint_interval = 2;
  config.log.metrics_path = dir + "/m.jsonl";
  config = train::validate_train_config(config).value();
  auto comm = train::make_communicator(config.comm).value();
  ASSERT_TRUE(train::run_training(config, *comm, {}).is_ok());
  train::RunOptions options;
  options.resume = train::checkpoint_dir(config.train.checkpoint_dir, 2);
  // A resume that only evaluates step 2 writes nothing past it and keeps the later
  // checkpoints: the records stay (self-review, 2026-12-07), its evaluation appended.
  train::TrainConfig evaluates = config;
  evaluates.train.steps = 2;
  evaluates = train::validate_train_config(evaluates).value();
  ASSERT_TRUE(train::run_training(evaluates, *comm, options).is_ok());
  EXPECT_FALSE(std::filesystem::exists(config.log.metrics_path + ".past-2"));
  config.train.steps = 4;
  config = train::validate_train_config(config).value();
  ASSERT_TRUE(train::run_training(config, *comm, options).is_ok());
  std::ifstream in(config.log.metrics_path);
  std::vector<std::string> steps;
  for (std::string line; std::getline(in, line);) {
    const std::size_t at = line.find("\"step\":");
    steps.push_back(line.substr(10, line.find('"', 10) - 10) + " " +
                    line.substr(at + 7, line.find(',', at) - at - 7));
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"step 1", "step 2", "eval 2", "eval 2", "end 2",
                                             "step 3", "step 4", "eval 4", "end 4"}));
  EXPECT_TRUE(std::filesystem::exists(config.log.metrics_path + ".past-2"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sparq
