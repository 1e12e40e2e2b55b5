#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include <memory>

namespace sparq::log {
namespace {

struct Identity {
  int rank = 0;
  int world_size = 1;
  std::string host;
};

Identity& identity() {
  static Identity id = [] {
    Identity fresh;
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) == 0) fresh.host = buf;
    return fresh;
  }();
  return id;
}

}  // namespace

void init(const Options& options) {
  identity().rank = options.rank;
  identity().world_size = options.world_size;
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("sparq", sink);
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}/{}] [%^%l%$] %v", options.rank,
                                  options.world_size));
  auto level = spdlog::level::from_str(options.level);
  if (options.rank != 0 && !options.all_ranks && level < spdlog::level::warn) {
    level = spdlog::level::warn;
  }
  logger->set_level(level);
  spdlog::set_default_logger(logger);
}

int rank() { return identity().rank; }
int world_size() { return identity().world_size; }
const std::string& host_name() { return identity().host; }

}  // namespace sparq::log
