// The device tree strategy (compress/device_tree.h) against GtopkAggregator on one rank, over
// several steps (each starting from the CPU's residual): gtopk, topk and lbs, with and without
// error feedback, on the self communicator and, with NCCL built, a one-rank NCCL communicator
// (its broadcast and allreduce run: Note [A world of one on NCCL]); the bucket (the average
// on the global set, 0 elsewhere), the residual (0 on the set) and the payload (but for the
// own list's size: the capacity on the device) equal the CPU's. Several
// ranks' rounds send and merge the same lists, which one process cannot show. Label gpu.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/device_test_util.h"
#include "compress/device_codec.h"
#include "compress/device_tree.h"
#include "compress/error_feedback.h"
#include "compress/gtopk_aggregator.h"
#include "one_rank_comms.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

#if SPARQ_HAS_CUDA
using sparq::testing::GuardedDeviceArray;
using testing::make;
using testing::normal_vector;

void check_tree(comm::Communicator& comm, const ExecContext& exec, const std::string& name,
                bool feedback) {
  SCOPED_TRACE(name + (feedback ? " +ef" : "") + " on " + comm.backend());
  const std::size_t n = 20011;
  auto cpu = make(name, {{"density", "0.01"}});
  auto codec = cpu->device_codec();
  ASSERT_NE(codec, nullptr);
  ASSERT_TRUE(cpu->density().has_value());
  GtopkAggregator cpu_strategy;
  DeviceTree device_strategy;
  std::vector<float> residual = normal_vector(n, 5, 0.1f);
  GuardedDeviceArray<float> de(residual);
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    de.upload(residual);
    EncodeContext ctx;
    ctx.seed = 4;
    ctx.step = step;
    const std::vector<float> g = normal_vector(n, 70 + step);
    // This rank's own list, whose bytes the CPU counts at their size and the device at the
    // codec's capacity (what moves there); the rest of the payload is the same k floats.
    std::vector<float> a = g;
    if (feedback) {
      for (std::size_t i = 0; i < n; ++i) a[i] += residual[i];
    }
    EncodeContext own = ctx;
    own.world_size = comm.size();
    Message own_list;
    cpu->encode(a, own, own_list);
    std::vector<float> bucket = g;
    ErrorFeedback ef(residual);
    ASSERT_TRUE(cpu_strategy.run(bucket, *cpu, feedback ? &ef : nullptr, comm, ctx).is_ok());
    GuardedDeviceArray<float> dg(g);
    ASSERT_TRUE(device_strategy
                    .run(std::span<float>(dg.data(), n), *codec, *cpu->density(),
                         cpu->capabilities().merges_by_encode, feedback ? de.data() : nullptr, comm,
                         ctx, exec, nullptr)
                    .is_ok());
    EXPECT_EQ(dg.download(), bucket) << "the average on the global set";
    EXPECT_EQ(device_strategy.last_payload_bytes() - codec->capacity(n, own),
              cpu_strategy.last_payload_bytes() - own_list.size());
    if (feedback) {
      EXPECT_EQ(de.download(), residual) << "a, zeroed on the global set";
    }
    EXPECT_TRUE(dg.guards_intact() && de.guards_intact());
  }
}

void check_all(comm::Communicator& comm, const ExecContext& exec) {
  for (const char* name : {"gtopk", "topk", "lbs"}) {  // lbs: merged by encode
    for (bool feedback : {true, false}) check_tree(comm, exec, name, feedback);
  }
}
#endif

TEST(CudaTree, OneRankMatchesTheCpuStrategy) {
  SPARQ_SKIP_WITHOUT_GPU();
#if SPARQ_HAS_CUDA
  testing::on_one_rank_communicators(check_all);
#endif
}

}  // namespace
}  // namespace sparq::compress
