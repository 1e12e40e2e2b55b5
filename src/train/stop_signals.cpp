// Note [Stopping on a signal] (stop_signals.h).
#include "train/stop_signals.h"

#include <fmt/format.h>

#include <atomic>
#include <csignal>

namespace sparq::train {
namespace {

// Lock-free, so the handler may write it (async-signal-safe).
std::atomic<int> g_requested{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_stop_signal(int signal) {
  int none = 0;
  if (g_requested.compare_exchange_strong(none, signal)) return;
  // A second stop signal: the default action now (signal() and raise() are async-signal-safe).
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGUSR1};

void install_handlers(struct sigaction* previous) {
  // train_main() may run again in one process (run.h): a signal that stopped the last run
  // must not stop the next one before its first step.
  g_requested.store(0);
  struct sigaction action = {};
  action.sa_handler = record_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) {
    sigaction(kStopSignals[i], &action, previous == nullptr ? nullptr : &previous[i]);
  }
}

}  // namespace

void install_stop_signal_handlers() { install_handlers(nullptr); }

ScopedStopSignalHandlers::ScopedStopSignalHandlers() { install_handlers(previous_); }

ScopedStopSignalHandlers::~ScopedStopSignalHandlers() {
  for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &previous_[i], nullptr);
}

int requested_stop_signal() { return g_requested.load(); }

std::string stop_signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return fmt::format("signal {}", signal);
  }
}

}  // namespace sparq::train
