#include "core/check.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/log.h"
#include "core/status.h"

namespace sparq {
namespace {

std::mutex& handler_mutex() {
  static std::mutex m;
  return m;
}

FatalHandler& handler() {
  static FatalHandler h;
  return h;
}

}  // namespace

FatalHandler set_fatal_handler(FatalHandler new_handler) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  FatalHandler previous = std::move(handler());
  handler() = std::move(new_handler);
  return previous;
}

void fatal_error(const char* file, int line, const std::string& message) {
  // Plain stderr: the logger itself may be what is broken, and this line must get out.
  std::fprintf(stderr, "[sparq FATAL] rank %d on %s at %s:%d: %s\n", log::rank(),
               log::host_name().c_str(), file, line, message.c_str());
  std::fflush(stderr);
  FatalHandler h;
  {
    std::lock_guard<std::mutex> lock(handler_mutex());
    h = handler();
  }
  if (h) h(1);
  std::abort();
}

void fatal_result_access(const std::string& message) {
  fatal_error(__FILE__, __LINE__, "value() of a failed Result: " + message);
}

}  // namespace sparq
