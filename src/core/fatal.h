// The job-ending error path, free of fmt so that CUDA (.cu) files can include it.
// check.h builds SPARQ_CHECK on top of it for ordinary C++ code.
#pragma once

#include <functional>
#include <string>

namespace sparq {

// Prints rank, host, file:line and the message, calls the fatal handler, then aborts.
[[noreturn]] void fatal_error(const char* file, int line, const std::string& message);

// Called by fatal_error after printing; must not return. Default: std::abort().
// The communication layer installs MPI_Abort here. Returns the previous handler.
using FatalHandler = std::function<void(int exit_code)>;
FatalHandler set_fatal_handler(FatalHandler handler);

}  // namespace sparq
