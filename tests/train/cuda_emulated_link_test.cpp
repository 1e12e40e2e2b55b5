// One GPU standing in for a cluster (label gpu; skipped without a device or NCCL): GPT-2 tiny
// trained on one GPU whose bucket queue is a one-rank NCCL communicator with an emulated slow
// link priced for a world of 4 ranks (comm.emulate.ranks). The link costs time on the NCCL
// stream only: the losses equal the run without it bit for bit, each bucket is priced as
// rank 0's share of a 4-rank ring allreduce and its exchange lasts at least that long on the
// GPU; with overlap the first buckets travel while backward still runs, and without it every
// bucket travels after backward ended (the baseline bench/gpu_wfbp.sh measures against).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/emulated_link.h"
#include "comm/nccl_queue.h"
#include "common/device_test_util.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

constexpr const char* kGpt2Tiny =
    R"(model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 2}
data: {source: markov, seq_len: 64}
optim: {name: adamw, lr: 3.0e-3, clip_norm: 1.0}
comm: {first_bucket_mb: 0.1, bucket_mb: 0.25}
train: {device: cuda, steps: 20, micro_batch: 4, eval_batches: 2, seed: 3}
log: {progress_interval: 0})";
constexpr int kLinkSteps = 6;
const comm::EmulatedLink kLink{.gbit_per_s = 1.0, .ranks = 4};

std::vector<StepMetrics> run(comm::Communicator& comm, std::vector<std::string> set) {
  auto config = parse_train_config(kGpt2Tiny, "cuda_emulated_link_test", set);
  EXPECT_TRUE(config.is_ok()) << config.status().message();
  if (!config.is_ok()) return {};
  auto trainer = Trainer::create(*config, comm);
  EXPECT_TRUE(trainer.is_ok()) << trainer.status().message();
  if (!trainer.is_ok()) return {};
  std::vector<StepMetrics> out;
  for (int s = 0; s < kLinkSteps; ++s) out.push_back((*trainer)->train_step());
  return out;
}

TEST(CudaEmulatedLink, OneGpuStandsInForAClusterOnTheNcclStream) {
  SPARQ_SKIP_WITHOUT_GPU();
  if (!comm::nccl_queue_built()) GTEST_SKIP() << "sparq was built without NCCL: skipped";
  auto comm = comm::make_self_communicator();
  const std::vector<std::string> link = {"comm.emulate.gbit_per_s=1", "comm.emulate.ranks=4"};
  std::vector<std::string> after_backward = link;
  after_backward.push_back("comm.overlap=false");
  const auto plain = run(*comm, {});
  const auto overlapped = run(*comm, link);
  const auto baseline = run(*comm, after_backward);
  ASSERT_EQ(plain.size(), static_cast<std::size_t>(kLinkSteps));
  ASSERT_EQ(overlapped.size(), plain.size());
  ASSERT_EQ(baseline.size(), plain.size());

  bool some_hidden = false;
  for (int s = 0; s < kLinkSteps; ++s) {
    // Time only: a one-rank NCCL average is the identity whatever the link.
    EXPECT_EQ(overlapped[s].result.loss, plain[s].result.loss) << "step " << s;
    EXPECT_EQ(baseline[s].result.loss, plain[s].result.loss) << "step " << s;
    for (const auto* runs : {&overlapped, &baseline}) {
      const StepMetrics& m = (*runs)[s];
      const comm::StepCommStats& c = m.result.comm;
      ASSERT_GT(c.buckets.size(), 2u) << "the test wants several buckets";
      // Rank 0 of a 4-rank ring sends 3 of 4 blocks twice: 1.5 x the gradient's bytes, up to
      // the blocks' rounding (one element per block and phase).
      const double want = 1.5 * static_cast<double>(m.dense_bytes);
      EXPECT_NEAR(static_cast<double>(c.bytes_sent), want, 8.0 * c.buckets.size()) << s;
      double priced_us = 0;
      for (const comm::BucketTiming& b : c.buckets) {
        const double us = kLink.call_us(b.bytes);
        priced_us += us;
        EXPECT_GE(static_cast<double>(b.end_us - b.start_us), 0.99 * us)
            << "step " << s << " bucket " << b.index;
      }
      EXPECT_GE(c.comm_busy_ms * 1e3, 0.99 * priced_us) << "step " << s;
    }
    some_hidden = some_hidden || overlapped[s].result.comm.hidden_ms > 0;
    // The baseline starts every bucket after backward ended on the GPU: nothing is hidden and
    // all of it is exposed.
    const comm::StepCommStats& b = baseline[s].result.comm;
    EXPECT_LT(b.hidden_ms, 0.01) << "step " << s;
    EXPECT_GE(b.exposed_ms, 0.99 * b.comm_busy_ms) << "step " << s;
  }
  EXPECT_TRUE(some_hidden) << "no bucket travelled while backward ran";
}

}  // namespace
}  // namespace sparq::train
