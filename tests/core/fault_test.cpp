// core/fault.h: the SPARQ_FAULT filters (point, rank, step, hit) and the `fail` action. The
// process-ending actions are exercised by the mpirun fault-injection tests.
#include "core/fault.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace sparq::fault {
namespace {

// SPARQ_FAULT is read once per process, at the first point() call: one test sets it for all.
TEST(Fault, FiltersByPointRankStepAndHit) {
  ASSERT_EQ(setenv("SPARQ_FAULT",
                   "disk.write,rank=1,hit=3,action=fail;other,step=7,action=fail;"
                   "twice,hit=1,action=fail;twice,hit=2,action=fail",
                   1),
            0);
  set_rank(0);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(point("disk.write")) << "rank 0 must not fire";
  set_rank(1);
  EXPECT_FALSE(point("disk.write"));
  EXPECT_FALSE(point("disk.write"));
  EXPECT_TRUE(point("disk.write")) << "the third matching call fires";
  EXPECT_FALSE(point("disk.write")) << "a spec fires once";
  EXPECT_FALSE(point("unnamed.point"));
  EXPECT_FALSE(point("other", 6));
  EXPECT_TRUE(point("other", 7));
  // Two specs for one point each count every call: they fire on calls 1 and 2, not 1 and 3.
  EXPECT_TRUE(point("twice"));
  EXPECT_TRUE(point("twice"));
  EXPECT_FALSE(point("twice"));
}

}  // namespace
}  // namespace sparq::fault
