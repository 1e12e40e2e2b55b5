// The device two_phase strategy (compress/device_two_phase.h) against TwoPhaseAggregator on
// one rank, over several steps (the residual and the server residual carry, each step starting
// from the CPU's, loaded through load_state): lbs, topk, blockquant and dgc, server
// compression on and off (dgc: off only), with and without error feedback; the
// bucket's floats, the residual and the server residual (its checkpoint bytes) after each
// step, and the server residual loaded into a fresh strategy. On the self communicator the
// rank decodes its own blocks; with NCCL built, a one-rank NCCL communicator runs the
// alltoall and allgather too (Note [A world of one on NCCL]). Several ranks' regions are the
// CPU's (region_begin), proven under MPI by test_compress_mpi. Label gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/device_test_util.h"
#include "compress/device_codec.h"
#include "compress/device_two_phase.h"
#include "compress/error_feedback.h"
#include "compress/two_phase_aggregator.h"
#include "one_rank_comms.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

#if SPARQ_HAS_CUDA
using sparq::testing::GuardedDeviceArray;
using testing::expect_same_floats;
using testing::make;
using testing::normal_vector;

std::vector<float> floats_of(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), 4 * out.size());
  return out;
}

void check_two_phase(comm::Communicator& comm, const ExecContext& exec, const std::string& name,
                     const std::map<std::string, std::string>& params, bool server, bool feedback) {
  SCOPED_TRACE(name + (server ? " server compression" : " dense results") +
               (feedback ? " +ef" : "") + " on " + comm.backend());
  const std::size_t n = 10007;
  auto cpu = make(name, params);
  auto codec = cpu->device_codec();
  ASSERT_NE(codec, nullptr);
  TwoPhaseAggregator cpu_strategy({.server_compression = server});
  DeviceTwoPhase device_strategy(server);
  std::vector<float> residual = normal_vector(n, 3, 0.1f);
  GuardedDeviceArray<float> de(residual);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // Each step starts from the CPU's residuals (one float step apart at most after a step,
    // which must not compound into other roundings later), loaded as a checkpoint would be.
    de.upload(residual);
    std::vector<std::uint8_t> server_state;
    cpu_strategy.save_state(server_state);
    ASSERT_TRUE(device_strategy.load_state(1, server_state).is_ok());
    EncodeContext ctx;
    ctx.seed = 9;
    ctx.step = step;
    ctx.bucket_id = 1;
    const std::vector<float> g = normal_vector(n, 50 + step);
    std::vector<float> bucket = g;
    ErrorFeedback ef(residual);
    ASSERT_TRUE(cpu_strategy.run(bucket, *cpu, feedback ? &ef : nullptr, comm, ctx).is_ok());
    GuardedDeviceArray<float> dg(g);
    ASSERT_TRUE(device_strategy
                    .run(1, std::span<float>(dg.data(), n), *codec, feedback ? de.data() : nullptr,
                         comm, ctx, exec, nullptr)
                    .is_ok());
    expect_same_floats(dg.download(), bucket, "bucket", /*one_step=*/true);
    if (feedback) expect_same_floats(de.download(), residual, "residual", /*one_step=*/true);
    std::vector<std::uint8_t> want_state, got_state;
    cpu_strategy.save_state(want_state);
    device_strategy.save_state(1, got_state);
    expect_same_floats(floats_of(got_state), floats_of(want_state), "server residual",
                       /*one_step=*/true);
    ASSERT_TRUE(dg.guards_intact() && de.guards_intact());
  }
  std::vector<std::uint8_t> saved, reloaded;
  device_strategy.save_state(1, saved);
  DeviceTwoPhase fresh(server);
  ASSERT_TRUE(fresh.load_state(1, saved).is_ok());
  fresh.save_state(1, reloaded);
  EXPECT_EQ(reloaded, saved);
}

void check_every_two_phase_case(comm::Communicator& comm, const ExecContext& exec) {
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> codecs = {
      {"lbs", {}},
      {"topk", {{"density", "0.05"}}},
      {"blockquant", {}},
      {"dgc", {{"density", "0.05"}}},
  };
  for (const auto& [name, params] : codecs) {
    for (bool server : {true, false}) {
      if (server && name == "dgc") continue;  // refused (CompressorCapabilities::position_state)
      for (bool feedback : {true, false})
        check_two_phase(comm, exec, name, params, server, feedback);
    }
  }
}
#endif

TEST(CudaTwoPhase, OneRankMatchesTheCpuStrategy) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  testing::on_one_rank_communicators(check_every_two_phase_case);
#endif
}

}  // namespace
}  // namespace sparq::compress
