// Error-compensated compression converges like dense training (issue: WFBP scheduler and
// error-compensated optimizers). Under mpirun, GPT-2 tiny learns the synthetic Markov source
// (known entropy rate) with the same seed, data and steps:
//   - AdamW: lbs (top-1% + 4-bit) WITH error feedback ends within 5% of the dense run's
//     evaluation loss; WITHOUT error feedback the gap is printed, not asserted.
//   - SGD with DGC (momentum correction inside the compressor, top-1%) against dense SGD with
//     momentum: printed, and asserted loosely (within 12%; observed 8% after 300 steps),
//     since DGC's published parity comes after far more steps than a unit test can afford.
//   - The optimizer modes (optim.communicate) with lbs and error feedback against the same dense
//     AdamW run: the error-compensated update (update) and the frozen-variance momentum after
//     a dense warm-up (momentum); bounds below, from observed margins.
// Runs are deterministic (fixed seeds, thread-count independent kernels), so the margins
// guard against regressions, not against noise.
// Every rank runs the same trainer; results are identical on all ranks (the loss is
// averaged over ranks by the evaluation).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

constexpr char kConfig[] = R"(
model: {preset: gpt2-tiny, vocab_size: 256, n_ctx: 64, n_layer: 2}
data:
  source: markov
  seq_len: 64
  markov: {vocab_size: 256, order: 1, branching: 4, smoothing: 0.02, seed: 7,
           train_tokens: 1048576, eval_tokens: 32768}
optim: {name: adamw, lr: 3.0e-3, beta2: 0.99, weight_decay: 0.01, schedule: cosine,
        warmup_steps: 20, min_lr: 3.0e-4, clip_norm: 1.0}
compress: {name: none, lbs: {density: 0.01, bits: 4}, dgc: {density: 0.01, momentum: 0.9}}
comm: {first_bucket_mb: 0.25, bucket_mb: 1, dense_patterns: ["*.bias", "*ln_*"]}
train: {steps: 300, micro_batch: 8, eval_batches: 16, seed: 1}
log: {progress_interval: 0}
)";

struct Outcome {
  double eval_loss = 0;
  double entropy = 0;
  double ratio = 1;  // compression
  std::uint64_t checksum = 0;  // this rank's parameters after the run
};

Outcome train_with(comm::Communicator& comm, const std::vector<std::string>& overrides) {
  auto config = parse_train_config(kConfig, "convergence_mpi_test", overrides);
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  auto trainer = Trainer::create(*config, comm);
  SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
  auto summary = (*trainer)->run();
  SPARQ_CHECK(summary.is_ok(), "{}", summary.status().message());
  return {summary->eval.loss, (*trainer)->data_info().entropy_rate, summary->compression_ratio,
          summary->param_checksum};
}

class Convergence : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = comm::make_mpi_communicator();
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    comm_ = std::move(c).value();
  }
  void report(const char* what, const Outcome& o, const Outcome& dense) {
    if (comm_->rank() != 0) return;
    std::printf("  %-28s eval loss %.4f (%+.2f%% vs dense, %.1f%% above the entropy rate "
                "%.4f), compression x%.1f\n",
                what, o.eval_loss, 100.0 * (o.eval_loss / dense.eval_loss - 1.0),
                100.0 * (o.eval_loss / o.entropy - 1.0), o.entropy, o.ratio);
  }
  // Every rank holds the same parameters (modes with per-rank optimizer state must still apply
  // one identical update everywhere).
  void expect_replicas_identical(const Outcome& o, const char* what) {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_->size()));
    const auto mine = static_cast<std::int64_t>(o.checksum);
    comm_->allgather(&mine, all.data(), 1, DType::kI64);
    for (std::uint64_t c : all) EXPECT_EQ(c, o.checksum) << what << ": replicas diverged";
  }
  std::unique_ptr<comm::Communicator> comm_;
};

TEST_F(Convergence, LbsWithErrorFeedbackMatchesDenseAdamW) {
  const Outcome dense = train_with(*comm_, {});
  const Outcome ef = train_with(*comm_, {"compress.name=lbs"});
  const Outcome no_ef = train_with(*comm_, {"compress.name=lbs", "compress.error_feedback=false"});
  report("dense (none)", dense, dense);
  report("lbs + error feedback", ef, dense);
  report("lbs without error feedback", no_ef, dense);
  EXPECT_LT(dense.eval_loss, 1.3 * dense.entropy) << "the dense run itself did not learn";
  EXPECT_LT(ef.eval_loss, 1.05 * dense.eval_loss);
  EXPECT_GT(ef.ratio, 20.0);
}

TEST_F(Convergence, LbsSendingUpdatesOrFrozenVarianceMomentumMatchesDenseAdamW) {
  const Outcome dense = train_with(*comm_, {});
  const Outcome update = train_with(*comm_, {"compress.name=lbs", "optim.communicate=update"});
  const Outcome momentum =
      train_with(*comm_, {"compress.name=lbs", "optim.communicate=momentum",
                          "optim.freeze_steps=50", "compress.dense_warmup_steps=50"});
  report("dense (none)", dense, dense);
  report("lbs + EF, communicate update", update, dense);
  report("lbs + EF, communicate momentum", momentum, dense);
  EXPECT_LT(update.eval_loss, 1.04 * dense.eval_loss);  // observed +1.6%
  EXPECT_LT(momentum.eval_loss, 1.03 * dense.eval_loss);  // observed +0.5%
  EXPECT_GT(update.ratio, 20.0);
  expect_replicas_identical(update, "communicate update");
  expect_replicas_identical(momentum, "communicate momentum");
}

TEST_F(Convergence, DgcMomentumCorrectionTracksDenseSgdMomentum) {
  const std::vector<std::string> sgd = {"optim.name=sgd", "optim.lr=0.5", "optim.weight_decay=0",
                                        "optim.min_lr=0.05"};
  std::vector<std::string> dense_args = sgd, dgc_args = sgd;
  dense_args.emplace_back("optim.momentum=0.9");
  dgc_args.emplace_back("compress.name=dgc");  // the momentum lives in the compressor
  const Outcome dense = train_with(*comm_, dense_args);
  const Outcome dgc = train_with(*comm_, dgc_args);
  report("SGD momentum, dense", dense, dense);
  report("SGD + dgc momentum correction", dgc, dense);
  EXPECT_LT(dense.eval_loss, 1.5 * dense.entropy) << "the dense run itself did not learn";
  EXPECT_LT(dgc.eval_loss, 1.12 * dense.eval_loss);
  EXPECT_LT(dgc.eval_loss, 1.2 * dgc.entropy) << "dgc did not learn the source";
  // And it compressed (1% density): a run that sent dense would pass the two above.
  EXPECT_GT(dgc.ratio, 20.0);
}

}  // namespace
}  // namespace sparq::train
