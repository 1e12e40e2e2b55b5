// fresh_dir(name): an empty scratch directory of the running test,
// <TempDir>/sparq_<suite>_<test>_<name> (an earlier run's removed first). Named after the test,
// so the test files of one binary need no prefixes of their own (Note [Unity test binaries],
// cmake/SparqTargets.cmake: they share one anonymous namespace).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace sparq::testing {

inline std::string fresh_dir(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string owner =
      test != nullptr ? std::string(test->test_suite_name()) + "_" + test->name() : "no_test";
  std::replace(owner.begin(), owner.end(), '/', '_');  // parameterised tests: Suite/Name/0
  const std::string dir = ::testing::TempDir() + "/sparq_" + owner + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace sparq::testing
