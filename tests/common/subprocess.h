// Runs a shell command for tests that drive a whole program (mpirun jobs, apps): returns its
// exit code and everything it printed (the command should end in 2>&1 to include stderr).
// A signal-terminated command reports 128 + the signal, like a shell.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace sparq::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string output;
};

inline ProcessResult run_command(const std::string& command) {
  ProcessResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    result.output = "popen failed for: " + command;
    return result;
  }
  char chunk[4096];
  std::size_t n = 0;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) result.output.append(chunk, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace sparq::testing
