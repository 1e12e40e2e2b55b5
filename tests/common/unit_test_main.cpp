// main() of every unit test binary (sparq_add_test, cmake/SparqTargets.cmake): GoogleTest's
// own, except that death tests default to the "threadsafe" style, which runs the statement in
// a freshly started copy of the binary instead of a fork. A forked child inherits a process
// whose OpenMP (or BLAS, or CUDA) threads it does not have: run outside ctest, which sets
// OMP_NUM_THREADS=1, test_models hung in its first death test on a 2-core machine. The flag is
// set before GoogleTest reads the command line, so --gtest_death_test_style still wins.
//
// Every test skipped: exit code 77, which ctest reports as skipped (Note [Skipped test
// binaries], common/skip_code.h).
#include <gtest/gtest.h>

#include "common/skip_code.h"

int main(int argc, char** argv) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  if (result == 0 && sparq::testing_support::every_test_skipped()) {
    return sparq::testing_support::kSkipExitCode;
  }
  return result;
}
