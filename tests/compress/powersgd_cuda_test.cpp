// powersgd on the device against the CPU (Note [PowerSGD's fixed summation order],
// compress/powersgd_math.h): each kernel of compress/cuda/powersgd_cuda.h equals its CPU
// function bit for bit on odd shapes, with sentinels around every output; and DeviceLowRank
// (compress/device_low_rank.h) equals PowerSgdAggregator on one rank over several steps (a
// zero step among them), full and alternate, with and without error feedback: the bucket,
// the residual, the payload and the saved state, on the self communicator and a one-rank
// NCCL one (whose allreduces run); a state saved from the device resumes identically.
// Label gpu: skipped without a device.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/device_test_util.h"
#include "compress/aggregation.h"
#include "compress/device_low_rank.h"
#include "compress/error_feedback.h"
#include "compress/powersgd.h"
#include "one_rank_comms.h"
#include "test_util.h"

#if SPARQ_HAS_CUDA
#include "compress/cuda/powersgd_cuda.h"
#endif

namespace sparq::compress {
namespace {

#if SPARQ_HAS_CUDA
using sparq::testing::GuardedDeviceArray;
using testing::normal_vector;

std::unique_ptr<PowerSgdCompressor> make_psgd(bool alternate) {
  auto c = testing::make(
      "powersgd",
      {{"rank", "3"}, {"min_compress_numel", "64"}, {"alternate", alternate ? "true" : "false"}});
  return std::unique_ptr<PowerSgdCompressor>(dynamic_cast<PowerSgdCompressor*>(c.release()));
}

void check_exchange(comm::Communicator& comm, const ExecContext& exec, bool alternate,
                    bool feedback) {
  SCOPED_TRACE(std::string(alternate ? "alternate" : "full") + (feedback ? " +ef" : "") + " on " +
               comm.backend());
  const std::size_t n = 9000;
  const std::vector<MatrixSegment> layout = {
      {"a", 0, 70, 50}, {"bias", 3500, 1, 50}, {"b", 3600, 45, 61}, {"wide", 6400, 13, 200}};
  auto cpu = make_psgd(alternate), gpu = make_psgd(alternate);
  ASSERT_TRUE(cpu->set_layout(n, layout).is_ok());
  ASSERT_TRUE(gpu->set_layout(n, layout).is_ok());
  auto cpu_strategy = make_aggregator(Aggregation::kLowRank);
  auto device_strategy = std::make_unique<DeviceLowRank>(*gpu);
  std::vector<float> residual(n, 0.0f);
  ErrorFeedback ef(residual);
  GuardedDeviceArray<float> de(residual);
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    EncodeContext ctx;
    ctx.seed = 11;
    ctx.step = step;
    // Step 2 is all zeros: the warm start survives it on both sides.
    const std::vector<float> g =
        step == 2 ? std::vector<float>(n, 0.0f) : normal_vector(n, 30 + step);
    std::vector<float> bucket = g;
    ASSERT_TRUE(cpu_strategy->run(bucket, *cpu, feedback ? &ef : nullptr, comm, ctx).is_ok());
    GuardedDeviceArray<float> dg(g);
    ASSERT_TRUE(
        device_strategy
            ->run(std::span<float>(dg.data(), n), feedback ? de.data() : nullptr, comm, ctx, exec)
            .is_ok());
    EXPECT_EQ(dg.download(), bucket) << "the averaged approximation";
    if (feedback) {
      EXPECT_EQ(de.download(), residual) << "e = a - M_hat";
    }
    EXPECT_EQ(device_strategy->last_payload_bytes(), cpu_strategy->last_payload_bytes());
    std::vector<std::uint8_t> cpu_state, gpu_state;
    cpu->save_state(cpu_state);
    device_strategy->save_state(gpu_state);
    EXPECT_EQ(gpu_state, cpu_state) << "the factors and the parity, in the CPU's format";
    EXPECT_TRUE(dg.guards_intact() && de.guards_intact());
    if (step == 3) {  // resume on a fresh strategy from the device's checkpoint
      device_strategy.reset();
      gpu = make_psgd(alternate);
      ASSERT_TRUE(gpu->set_layout(n, layout).is_ok());
      device_strategy = std::make_unique<DeviceLowRank>(*gpu);
      ASSERT_TRUE(device_strategy->load_state(gpu_state).is_ok());
    }
  }
}

void check_powersgd(comm::Communicator& comm, const ExecContext& exec) {
  for (bool alternate : {false, true}) {
    for (bool feedback : {true, false}) check_exchange(comm, exec, alternate, feedback);
  }
}
#endif

TEST(CudaPowerSgd, KernelsEqualTheCpuBitForBit) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  for (auto [rows, cols, r] : {std::tuple<std::size_t, std::size_t, std::size_t>{37, 53, 3},
                               {3001, 129, 4},
                               {5, 700, 1}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " r=" + std::to_string(r));
    const MatrixSegment s{"m", 0, rows, cols};
    const auto m = normal_vector(rows * cols, 1), fq = normal_vector(cols * r, 2),
               fp = normal_vector(rows * r, 3), e = normal_vector(rows * cols, 4);
    GuardedDeviceArray<float> dm(m), dq(fq), dp(fp), de(e);
    GuardedDeviceArray<float> mq(rows * r), mtp(cols * r), y(rows * cols);
    cuda::psgd_times_factor(dm.data(), rows, cols, dq.data(), r, mq.data(), nullptr);
    cuda::psgd_times_t_factor(dm.data(), rows, cols, dp.data(), r, mtp.data(), nullptr);
    cuda::psgd_decode(dp.data(), dq.data(), rows, cols, r, y.data(), de.data(), nullptr);
    std::vector<float> want_mq(rows * r), want_mtp(cols * r), want_y(rows * cols);
    times_factor(m.data(), s, fq.data(), r, want_mq.data());
    times_t_factor(m.data(), s, fp.data(), r, want_mtp.data());
    outer_factors(fp.data(), fq.data(), s, r, want_y.data());
    std::vector<float> want_e = e;
    for (std::size_t i = 0; i < want_e.size(); ++i) want_e[i] -= want_y[i];
    EXPECT_EQ(mq.download(), want_mq) << "M Q";
    EXPECT_EQ(mtp.download(), want_mtp) << "M^T P";
    EXPECT_EQ(y.download(), want_y) << "P Q^T";
    EXPECT_EQ(de.download(), want_e) << "e - P Q^T";

    // Orthonormalisation over many chunks, a zero column among them.
    std::vector<float> tall = normal_vector(rows * r, 5);
    if (r > 1) {
      for (std::size_t i = 0; i < rows; ++i) tall[i * r + 1] = 0.0f;
    }
    GuardedDeviceArray<float> dt(tall);
    GuardedDeviceArray<double> partial(cuda::psgd_partial_doubles(rows));
    cuda::psgd_orthonormalize(dt.data(), rows, r, partial.data(), nullptr);
    orthonormalize_columns(tall.data(), rows, r);
    EXPECT_EQ(dt.download(), tall) << "orth";

    // The scale and the warm-start restore (one all-zero factor, one not).
    GuardedDeviceArray<float> scaled(fq.size()), zero(std::vector<float>(fq.size(), 0.0f));
    cuda::psgd_scale(dq.data(), scaled.data(), fq.size(), 0.25f, nullptr);
    cuda::psgd_restore_if_zero(zero.data(), dq.data(), fq.size(), nullptr);
    cuda::psgd_restore_if_zero(dp.data(), dm.data(), fp.size(), nullptr);
    std::vector<float> want_scaled = fq;
    for (float& v : want_scaled) v *= 0.25f;
    EXPECT_EQ(scaled.download(), want_scaled);
    EXPECT_EQ(zero.download(), fq) << "an all-zero factor gets its warm start back";
    EXPECT_EQ(dp.download(), fp) << "a non-zero factor is kept";
    for (const auto* a : {&dm, &dq, &dp, &de, &mq, &mtp, &y, &dt, &scaled, &zero}) {
      EXPECT_TRUE(a->guards_intact());
    }
    EXPECT_TRUE(partial.guards_intact());
  }
#endif
}

TEST(CudaPowerSgd, OneRankMatchesTheCpuStrategy) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  testing::on_one_rank_communicators(check_powersgd);
#endif
}

}  // namespace
}  // namespace sparq::compress
