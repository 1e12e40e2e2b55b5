// For the device strategies' tests (label gpu): runs check(comm, exec) on a CUDA context with
// a one-rank self communicator, whose rank decodes its own messages, and, with NCCL built,
// with a one-rank NCCL communicator, whose collectives run (Note [A world of one on NCCL],
// compress/device_exchange.h). Call after SPARQ_SKIP_WITHOUT_GPU().
#pragma once

#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "common/device_test_util.h"

#if SPARQ_HAS_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace sparq::compress::testing {

template <typename Check>
void on_one_rank_communicators(Check&& check) {
  auto exec = sparq::testing::test_cuda_context();
  ASSERT_NE(exec, nullptr);
  auto self = comm::make_self_communicator();
  check(*self, *exec);
#if SPARQ_HAS_NCCL
  auto nccl = comm::make_nccl_communicator(*self);
  ASSERT_TRUE(nccl.is_ok()) << nccl.status().message();
  check(*nccl.value(), *exec);
#endif
}

}  // namespace sparq::compress::testing
