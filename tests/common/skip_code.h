// Note [Skipped test binaries]: a GoogleTest binary whose every selected test skipped itself
// (GTEST_SKIP: no CUDA device visible, no ../shared/data) exits kSkipExitCode, and ctest,
// told so by SKIP_RETURN_CODE (cmake/SparqTargets.cmake), reports it as skipped instead of
// passed. A binary where some tests ran and passed, or any failed, exits as GoogleTest says:
// a partial skip is printed in the log, and a failure is never hidden behind a skip.
#pragma once

#include <gtest/gtest.h>

namespace sparq::testing_support {

inline constexpr int kSkipExitCode = 77;

// True when at least one test was selected, none failed and every one skipped.
inline bool every_test_skipped() {
  const auto& unit = *::testing::UnitTest::GetInstance();
  return unit.test_to_run_count() > 0 && unit.failed_test_count() == 0 &&
         unit.skipped_test_count() == unit.test_to_run_count();
}

}  // namespace sparq::testing_support
