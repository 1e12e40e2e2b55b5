// under_file_size_limit(bytes, fn): runs fn with this process's RLIMIT_FSIZE lowered to
// `bytes` and SIGXFSZ ignored, so a write past the limit returns EFBIG (as on a filesystem
// that refuses a file that large) instead of killing the process; both are restored after.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <utility>

namespace sparq::testing {

template <typename Fn>
auto under_file_size_limit(rlim_t bytes, Fn&& fn) {
  rlimit saved{};
  EXPECT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = bytes;
  EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  auto result = std::forward<Fn>(fn)();
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  return result;
}

}  // namespace sparq::testing
