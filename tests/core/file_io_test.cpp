// read_file on files whose stat size is not their content's (core/file_io.cpp): procfs says 0
// bytes (read as an empty file before 2026-12-06) and sysfs a page (a "short read" error).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/file_io.h"

namespace sparq {
namespace {

TEST(ReadFile, ProcfsFilesAreReadWhole) {
  if (!std::filesystem::exists("/proc/self/status")) GTEST_SKIP() << "no /proc";
  auto status = read_file("/proc/self/status");
  ASSERT_TRUE(status.is_ok()) << status.status().message();
  EXPECT_NE(status->find("Name:"), std::string::npos) << *status;
}

TEST(ReadFile, SysfsFilesAreReadWhole) {
  const std::string path = "/sys/kernel/mm/transparent_hugepage/enabled";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto text = read_file(path);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_NE(text->find('['), std::string::npos) << *text;  // "always [madvise] never"
}

}  // namespace
}  // namespace sparq
