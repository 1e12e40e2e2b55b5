// Fault injection for reliability tests: named points in the code where a test can make one
// rank die, stall or fail on purpose, chosen from the environment so that the binary under
// test is the shipped one (no test-only build).
//
//   SPARQ_FAULT="<point>[,rank=R][,step=S][,hit=N][,action=A]"   (several specs: ';'-separated)
//
//   point   the name passed to fault::point() (see the list in docs/reliability.md)
//   rank    only on this rank (default: every rank)
//   step    only when the caller passes step S: the 0-based step index for training points
//           (the progress line says step S+1), the checkpoint's own number for checkpoint.*
//           (step=4 is step-00000004); default: any step; callers without a step pass -1
//   hit     fire on the N-th matching call of this process (1-based, default 1), so a test can
//           pick a "random" moment inside a repeated point such as a chunked file write
//   action  exit  : _exit(3) at once, no MPI_Finalize, no flush (a crashed process)   [default]
//           kill  : raise(SIGKILL)
//           stall : sleep forever (a hung process; the others must time out)
//           fail  : point() returns true, and the caller turns it into its ordinary error
//                   path (a write that fails as if the disk were full, ...)
//
// Without SPARQ_FAULT every point() is one atomic load and a branch. A SPARQ_FAULT that is
// malformed (an unknown point, key or action, a value out of range) or that could never
// match (step= for a point reached without a step, rank= other than 0 for a point only rank
// 0 reaches, a spec of the same point, rank, step and hit as an earlier one, separators with
// no spec) is refused: check_environment() says why (train and prepare_data call it at
// start-up, before any work, and report it; no point fires after that), and a point()
// reached without that check is a fatal error naming the bad spec.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace sparq::fault {

// Parses SPARQ_FAULT (once per process): an error names the bad spec and the accepted
// points, keys or actions.
Status check_environment();

// The same check for a SPARQ_FAULT value given as text; nothing is armed.
Status check_spec(std::string_view text);

// What a job reaches, for check_job(): the defaults are prepare_data's (one process, no MPI).
struct Job {
  std::string_view app;  // "train" or "prepare_data"
  int world_size = 1;
  bool mpi = false;         // the communicator is MPI's (comm.collective)
  bool checkpoints = true;  // train writes checkpoints (checkpoint.*: train.checkpoint_dir set)
  bool compresses = true;   // some bucket may be compressed (exchange.compressed)
  std::int64_t steps = -1;  // train: the run's last step index + 1 (-1: unknown)
};

// check_environment(), then what only the job knows: a spec of a point `job.app` never
// reaches, with rank= not below its world size, of comm.collective without an MPI
// communicator, of checkpoint.* in a run that writes no checkpoints, of exchange.compressed in
// a run that compresses nothing, or with a step= the run never reaches, would never fire and
// is refused (they ran to exit 0 without their fault: reviews, 2026-12-06 and 2026-12-07).
// run_training() checks as "train": an embedder that also writes shards in the process
// cannot arm shard.* for the same run.
Status check_job(const Job& job);

// At the end of a run that went to its end: an armed spec of this rank that never fired (a
// checkpoint step off the save interval, a step in the dense warm-up, a hit past the last
// matching call: what check_job cannot know) is an error naming it, so that the trial fails
// instead of passing without its fault (review, 2026-12-07). `first_step`: the step a
// resumed run started from (0 for a fresh one); specs of earlier steps belong to the run it
// continues (a trial sets one SPARQ_FAULT for its whole stop-and-resume sequence) and are
// not checked.
Status check_all_fired(std::int64_t first_step = 0);

// The rank used by the `rank=` filter; set once by the communicator's start-up (default 0).
void set_rank(int rank);

// An injection point. Returns true only for action=fail at a matching call; every other
// matching action does not return.
bool point(std::string_view name, std::int64_t step = -1);

}  // namespace sparq::fault
