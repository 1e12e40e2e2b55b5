// Stopping a run on a signal (Note [Stopping on a signal]): the `train` command installs
// handlers for SIGINT, SIGTERM and SIGUSR1 that only record the signal; the trainer polls the
// record at each step boundary (Trainer::Options::stop_requested), the ranks agree on it, and
// the run saves a checkpoint and ends with status 128 + the signal.
//
// Note [Stopping on a signal]
// A signal reaches the ranks of a job at different moments (mpirun forwards it to each,
// Slurm signals each task), so no rank may act on its own: each step boundary every rank
// adds the signal it holds to a 64-slot count (one 256-byte allreduce on the control engine,
// only in runs that poll; on comm.emulate's link it pays that link's price once a step, as a
// real network would), and all stop after the same step, taking the lowest signal number any
// rank holds; they poll again before a periodic evaluation and (with a checkpoint directory)
// before the final one, which a stop skips (the grace period before SIGKILL is for the save).
// Nothing is cut short: a step, an evaluation or a checkpoint in progress finishes first. A second
// signal of the same process gets the default action at once, so a stop that hangs can still be
// ended. Under mpirun, SIGINT and SIGTERM of mpirun itself reach the ranks as SIGTERM followed by
// SIGKILL one second later (Open MPI's odls_base_sigkill_timeout), usually too soon for the
// checkpoint; mpirun forwards SIGUSR1 as it is, which is the way to stop an mpirun job cleanly
// (docs/reliability.md, "Stopping a run").
#pragma once

#include <csignal>
#include <cstddef>
#include <string>

namespace sparq::train {

// Slots of the stop poll's allreduce: one per signal number, slot 0 counting the ranks whose
// Trainer::Options::stop_requested returned something else (Note [Stopping on a signal]).
inline constexpr std::size_t kStopSignalSlots = 64;

// Installs the recording handlers for SIGINT, SIGTERM and SIGUSR1 (SA_RESTART, so that
// interrupted system calls resume). Call once, after MPI is initialised.
void install_stop_signal_handlers();

// install_stop_signal_handlers() for a scope: the handlers the process had before come back
// when it ends, so that a program that calls train_main() keeps its own Ctrl-C and SIGTERM
// afterwards (they only set a flag nobody read once train_main() had returned: review,
// 2026-12-07). A signal recorded in the scope stays readable by requested_stop_signal().
class ScopedStopSignalHandlers {
 public:
  ScopedStopSignalHandlers();
  ~ScopedStopSignalHandlers();
  ScopedStopSignalHandlers(const ScopedStopSignalHandlers&) = delete;
  ScopedStopSignalHandlers& operator=(const ScopedStopSignalHandlers&) = delete;

 private:
  struct sigaction previous_[3];  // SIGINT, SIGTERM, SIGUSR1
};
// The first stop signal this process received since start-up (0: none).
int requested_stop_signal();
// "SIGTERM" for 15; "signal 40" for numbers without a name here.
std::string stop_signal_name(int signal);

}  // namespace sparq::train
