// Training on the GPU (label gpu; skipped without a device): the same 20 steps of GPT-2 tiny,
// BERT-tiny and VGG-tiny, dense (and GPT-2 tiny compressed with lbs and blockquant), one
// process, once with train.device: cpu and once with
// train.device: cuda, from the same seeds and data. The per-step training losses agree within
// 1e-3 relative (fp32 on both; the device sums in other orders, and Adam amplifies the
// rounding a little over 20 steps), and a checkpoint written on the GPU resumes there bit
// for bit. (Whether a run learns is the CPU tests' business; 20 steps of these tiny models
// barely move the loss.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <utility>
#include <vector>

#include "common/device_test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

constexpr double kLossRtol = 1e-3;
constexpr int kSteps = 20;

const char* const kConfigs[] = {
    R"(model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 2}
data: {source: markov, seq_len: 64}
optim: {name: adamw, lr: 3.0e-3, clip_norm: 1.0}
train: {steps: 20, micro_batch: 4, accumulation: 2, eval_batches: 2, seed: 3}
log: {progress_interval: 0})",
    R"(model: {preset: bert-tiny, vocab_size: 256, n_ctx: 64}
data: {source: markov, seq_len: 32}
optim: {name: adamw, lr: 1.0e-3, clip_norm: 1.0}
train: {steps: 20, micro_batch: 4, eval_batches: 2, seed: 3}
log: {progress_interval: 0})",
    R"(model: {preset: vgg-tiny}
data: {source: synthetic_images}
optim: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 5.0e-4}
train: {steps: 20, micro_batch: 8, eval_batches: 2, seed: 3}
log: {progress_interval: 0})",
};

// The per-step training losses of kSteps steps on `device`, with extra --set overrides.
std::vector<double> losses(const char* yaml, Device device, comm::Communicator& comm,
                           std::vector<std::string> overrides = {}, int steps = kSteps) {
  overrides.push_back(std::string("train.device=") + std::string(device_name(device)));
  auto config = parse_train_config(yaml, "cuda_train_test", overrides);
  EXPECT_TRUE(config.is_ok()) << config.status().message();
  if (!config.is_ok()) return {};
  auto trainer = Trainer::create(*config, comm);
  EXPECT_TRUE(trainer.is_ok()) << trainer.status().message();
  if (!trainer.is_ok()) return {};
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) out.push_back((*trainer)->train_step().result.loss);
  return out;
}

TEST(CudaTraining, TwentyStepsMatchTheCpuRun) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto comm = comm::make_self_communicator();
  for (const char* yaml : kConfigs) {
    const std::vector<double> cpu = losses(yaml, Device::kCPU, *comm);
    const std::vector<double> gpu = losses(yaml, Device::kCUDA, *comm);
    ASSERT_EQ(cpu.size(), gpu.size()) << yaml;
    for (std::size_t s = 0; s < cpu.size(); ++s) {
      EXPECT_NEAR(gpu[s], cpu[s], kLossRtol * std::abs(cpu[s])) << "step " << s << "\n" << yaml;
    }
  }
}

// The GPU compression path (issue 17): GPT-2 tiny with lbs (1%, 4 bits, error feedback), and
// with dgc, gtopk (by the tree, its own strategy), blockquant, randomk, qsgd, terngrad, signsgd,
// onebit (by two_phase, its own strategy), powersgd (by low_rank, its exchange run whole on the
// device: compress/device_low_rank.h), fp16, bf16, topk_sampled and threshold (counts chosen
// on the device), one rank, so every step still compresses,
// encodes and decodes its own message; on the GPU that message goes through a one-rank NCCL
// collective (Note [A world of one on NCCL], compress/device_exchange.h), the path several GPUs
// take. The device codecs send the CPU's bytes for the same input (test_compress_cuda); the inputs
// differ by the device's rounding of the gradients, so the losses are held to the dense tolerance.
const char* const kCompressed = R"(model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 2}
data: {source: markov, seq_len: 64}
optim: {name: adamw, lr: 3.0e-3, clip_norm: 1.0}
compress: {name: lbs, lbs: {density: 0.01, bits: 4}, error_feedback: true}
comm: {first_bucket_mb: 0.25, bucket_mb: 1, dense_patterns: ["*.bias", "*ln_*"]}
train: {steps: 20, micro_batch: 4, eval_batches: 2, seed: 3}
log: {progress_interval: 0})";

TEST(CudaTraining, CompressedStepsMatchTheCpuRun) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto comm = comm::make_self_communicator();
  // fp16 and bf16 go through the device allreduce, the others through the device allgather.
  for (const std::string compressor :
       {"lbs", "dgc", "gtopk", "blockquant", "randomk", "qsgd", "terngrad", "signsgd", "onebit",
        "powersgd", "fp16", "bf16", "topk_sampled", "threshold"}) {
    const std::vector<double> cpu =
        losses(kCompressed, Device::kCPU, *comm, {"compress.name=" + compressor});
    const std::vector<double> gpu =
        losses(kCompressed, Device::kCUDA, *comm, {"compress.name=" + compressor});
    ASSERT_EQ(cpu.size(), gpu.size()) << compressor;
    for (std::size_t s = 0; s < cpu.size(); ++s) {
      EXPECT_NEAR(gpu[s], cpu[s], kLossRtol * std::abs(cpu[s])) << compressor << " step " << s;
    }
  }
}

// The optimizer modes with per-rank state (optim/optimizer.h), compressed with lbs: the
// momentum sent after 5 dense steps (b), and the update sent (c) by AdamW and by SGD with
// momentum. Both clip each rank's gradient locally (clip_scope auto), in place on the device
// (Optimizer::clip_local_gradient), before the mode's kernels read it.
TEST(CudaTraining, MomentumAndUpdateModesMatchTheCpuRun) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto comm = comm::make_self_communicator();
  const std::vector<std::vector<std::string>> modes = {
      {"optim.communicate=momentum", "optim.freeze_steps=5", "compress.dense_warmup_steps=5"},
      {"optim.communicate=update"},
      {"optim.communicate=update", "optim.name=sgd", "optim.momentum=0.9", "optim.lr=0.05"}};
  for (const std::vector<std::string>& mode : modes) {
    SCOPED_TRACE(mode[0] + (mode.size() > 3 ? " sgd" : ""));
    const std::vector<double> cpu = losses(kCompressed, Device::kCPU, *comm, mode);
    const std::vector<double> gpu = losses(kCompressed, Device::kCUDA, *comm, mode);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (std::size_t s = 0; s < cpu.size(); ++s) {
      EXPECT_NEAR(gpu[s], cpu[s], kLossRtol * std::abs(cpu[s])) << "step " << s;
    }
  }
}

// Note [bf16 GEMM operands]: train.precision: bf16 learns. GPT-2 tiny on the order-1 Markov
// source (the CPU run falls from 5.56 to about 1.8 nats in 60 steps) trains on bf16 GEMM
// operands next to an fp32 run from the same seeds: the bf16 loss must fall by 2 nats, and
// its last 10 steps' mean stay within 5% of the fp32 run's (rounding the operands to 8
// significant bits perturbs every step a little; Adam's trajectory drifts, it does not
// break). BERT-tiny's 20 steps, where the loss barely moves, stay within 2% step by step.
const char* const kLearns = R"(model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 2}
data: {source: markov, seq_len: 64, markov: {order: 1}}
optim: {name: adamw, lr: 3.0e-3, clip_norm: 1.0}
train: {steps: 60, micro_batch: 4, accumulation: 2, eval_batches: 2, seed: 3}
log: {progress_interval: 0})";

double mean_of_last(const std::vector<double>& v, std::size_t n) {
  double sum = 0;
  for (std::size_t i = v.size() - n; i < v.size(); ++i) sum += v[i];
  return sum / static_cast<double>(n);
}

TEST(CudaTraining, Bf16GemmOperandsLearnLikeFp32) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto comm = comm::make_self_communicator();
  const std::vector<double> fp32 = losses(kLearns, Device::kCUDA, *comm, {}, 60);
  const std::vector<double> bf16 =
      losses(kLearns, Device::kCUDA, *comm, {"train.precision=bf16"}, 60);
  ASSERT_EQ(fp32.size(), 60u);
  ASSERT_EQ(bf16.size(), 60u);
  for (const double l : bf16) ASSERT_TRUE(std::isfinite(l));
  EXPECT_NE(bf16, fp32) << "bf16 changed nothing: were the operands rounded?";
  EXPECT_LT(mean_of_last(bf16, 10), bf16.front() - 2.0);
  EXPECT_NEAR(mean_of_last(bf16, 10), mean_of_last(fp32, 10), 0.05 * mean_of_last(fp32, 10));
  const std::vector<double> bert32 = losses(kConfigs[1], Device::kCUDA, *comm);
  const std::vector<double> bert16 =
      losses(kConfigs[1], Device::kCUDA, *comm, {"train.precision=bf16"});
  ASSERT_EQ(bert32.size(), bert16.size());
  for (std::size_t s = 0; s < bert32.size(); ++s) {
    EXPECT_NEAR(bert16[s], bert32[s], 0.02 * bert32[s]) << "bert step " << s;
  }
}

// The exchange's metrics on the GPU (DeviceBucketMetrics, DeviceSendHistory): the residual
// norm, the relative compression error ||e|| / ||g + e|| (per bucket and overall) and the
// never-sent share track the CPU run's (measured there by ErrorFeedback and SendHistory; the
// sums differ in order and the gradients by rounding). lbs, and dgc, whose feedback input is
// u + e with its momentum u (DeviceCodec::set_input_measurement).
TEST(CudaTraining, CompressionMetricsMatchTheCpuRun) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto comm = comm::make_self_communicator();
  for (const std::string compressor : {"lbs", "dgc"}) {
    SCOPED_TRACE(compressor);
    std::vector<StepMetrics> runs[2];
    for (const Device device : {Device::kCPU, Device::kCUDA}) {
      auto config =
          parse_train_config(kCompressed, "cuda_train_test",
                             {std::string("train.device=") + std::string(device_name(device)),
                              "log.never_sent_window=3", "compress.name=" + compressor});
      ASSERT_TRUE(config.is_ok()) << config.status().message();
      auto trainer = Trainer::create(*config, *comm);
      ASSERT_TRUE(trainer.is_ok()) << trainer.status().message();
      for (int s = 0; s < 5; ++s) runs[device == Device::kCUDA].push_back((*trainer)->train_step());
    }
    for (std::size_t s = 0; s < runs[0].size(); ++s) {
      const StepMetrics& cpu = runs[0][s];
      const StepMetrics& gpu = runs[1][s];
      ASSERT_TRUE(cpu.rel_compression_error.has_value());
      ASSERT_TRUE(gpu.rel_compression_error.has_value()) << "step " << s;
      EXPECT_NEAR(*gpu.rel_compression_error, *cpu.rel_compression_error,
                  1e-2 * *cpu.rel_compression_error)
          << "step " << s;
      EXPECT_NEAR(gpu.residual_norm, cpu.residual_norm, 1e-2 * cpu.residual_norm) << "step " << s;
      // DeviceSendHistory: the share of coordinates unsent in the last 3 steps, from step 3
      // on. The selections differ only where the rounding of the gradients moves a boundary.
      ASSERT_EQ(gpu.never_sent_share.has_value(), cpu.never_sent_share.has_value()) << s;
      EXPECT_EQ(cpu.never_sent_share.has_value(), s >= 2) << "step " << s;
      if (cpu.never_sent_share) {
        EXPECT_NEAR(*gpu.never_sent_share, *cpu.never_sent_share, 1e-2) << "step " << s;
      }
      ASSERT_EQ(gpu.bucket_rel_error.size(), cpu.bucket_rel_error.size());
      for (std::size_t b = 0; b < cpu.bucket_rel_error.size(); ++b) {
        EXPECT_NEAR(gpu.bucket_rel_error[b], cpu.bucket_rel_error[b], 2e-2) << s << " " << b;
      }
    }
  }
}

// lbs keeps a residual on the device (and, in the momentum mode (b), each rank's momentum
// and the frozen variance); dgc keeps its momentum there too (DeviceCodec state),
// two_phase its server residual (DeviceTwoPhase), powersgd its factors (DeviceLowRank).
TEST(CudaTraining, CompressedCheckpointResumesBitIdenticallyOnTheGpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  struct Case {
    std::string compressor, aggregation;
    // The momentum mode (b): each rank's momentum and the frozen variance come off the device
    // too, frozen (step 5) before the checkpoint at step 10.
    bool momentum = false;
  };
  for (const Case& c :
       {Case{"lbs", "allgather"}, Case{"lbs", "allgather", true}, Case{"dgc", "allgather"},
        Case{"lbs", "two_phase"}, Case{"powersgd", "low_rank"}}) {
    const std::string name = c.compressor + "_" + c.aggregation + (c.momentum ? "_momentum" : "");
    SCOPED_TRACE(name);
    auto comm = comm::make_self_communicator();
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("sparq_cuda_" + name + "_resume_test");
    std::filesystem::remove_all(dir);
    std::vector<std::string> set = {"train.device=cuda", "train.checkpoint_dir=" + dir.string(),
                                    "compress.name=" + c.compressor,
                                    "compress.aggregation=" + c.aggregation};
    if (c.momentum) {
      for (const char* s : {"optim.communicate=momentum", "optim.freeze_steps=5",
                            "compress.dense_warmup_steps=5"}) {
        set.push_back(s);
      }
    }
    auto config = parse_train_config(kCompressed, "cuda_train_test", set);
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    auto full = Trainer::create(*config, *comm);
    ASSERT_TRUE(full.is_ok()) << full.status().message();
    ASSERT_TRUE((*full)->run(/*stop_at=*/10).is_ok());
    ASSERT_TRUE((*full)->save_checkpoint().is_ok());  // the residual comes off the device
    auto rest = (*full)->run();
    ASSERT_TRUE(rest.is_ok()) << rest.status().message();
    auto resumed = Trainer::create(*config, *comm);
    ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
    ASSERT_TRUE((*resumed)->resume(checkpoint_dir(dir.string(), 10)).is_ok());
    auto after = (*resumed)->run();
    ASSERT_TRUE(after.is_ok()) << after.status().message();
    // The resumed run takes only the steps after the checkpoint: a resume that loaded nothing
    // would retrain from step 0 to the same checksum (review, 2026-12-07).
    EXPECT_EQ(after->steps, rest->steps);
    EXPECT_EQ(after->steps_run, rest->steps - 10);
    EXPECT_EQ(after->param_checksum, rest->param_checksum);
    std::filesystem::remove_all(dir);
  }
}

TEST(CudaTraining, CheckpointResumesBitIdenticallyOnTheGpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto comm = comm::make_self_communicator();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "sparq_cuda_resume_test";
  std::filesystem::remove_all(dir);
  const std::vector<std::string> set = {"train.device=cuda",
                                        "train.checkpoint_dir=" + dir.string()};
  auto config = parse_train_config(kConfigs[0], "cuda_train_test", set);
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  auto full = Trainer::create(*config, *comm);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  auto first = (*full)->run(/*stop_at=*/10);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  ASSERT_TRUE((*full)->save_checkpoint().is_ok());
  auto rest = (*full)->run();
  ASSERT_TRUE(rest.is_ok()) << rest.status().message();

  auto resumed = Trainer::create(*config, *comm);
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  // From step 10's checkpoint (the run also wrote one at its end).
  const Status loaded = (*resumed)->resume(checkpoint_dir(dir.string(), 10));
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  auto after = (*resumed)->run();
  ASSERT_TRUE(after.is_ok()) << after.status().message();
  EXPECT_EQ(after->steps, rest->steps);  // only the steps after the checkpoint, as above
  EXPECT_EQ(after->steps_run, rest->steps - 10);
  EXPECT_EQ(after->param_checksum, rest->param_checksum);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sparq::train
