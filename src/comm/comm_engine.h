// CommEngine: runs communication tasks in FIFO order on one dedicated thread, off the
// compute path: the CPU/MPI flavour of CommQueue (comm_queue.h; NCCL uses StreamCommEngine in
// stream_engine.h).
//
// A task is a callable taking the engine's Communicator&. It returns Status or void, and
// may throw. submit() returns at once with a CommHandle; wait() blocks until that task is
// done. Tasks run strictly one after another in submission order, so a rank's MPI calls follow
// its submission order whatever the timing of its compute thread (Note [Rank-identical
// collective order], communicator.h).
//
// Threading: submit/wait/wait_all may be called from any thread; the task bodies run only on
// the engine thread, which is then the only thread that should touch the communicator while
// the engine is alive (the only way to be correct below MPI_THREAD_MULTIPLE). For a one-off
// synchronous call use run(). The engine thread runs its OpenMP regions (codecs encode and
// decode inside tasks) with its creator's thread count: OpenMP keeps that count per thread, so
// a new thread would otherwise start from OMP_NUM_THREADS or all cores, ignoring
// `train.threads`.
//
// Errors: a task's failed Status is returned by wait() (and wait_all()); an exception thrown
// by a task is rethrown by wait() on the waiting thread, the same object with its original
// message. After a failed Status later tasks still run; after an exception none does (Note [A
// task that threw ends the queue], comm_queue.h): each completes at once with a Status naming
// the task that threw.
//
// Timeouts: every wait is bounded by Options::timeout_s. When it expires the job ends
// through SPARQ_FATAL (MPI_Abort once make_mpi_communicator installed its handler) with a
// message naming the task, its step, this rank, and what the engine was running, because a
// peer that never joins a collective would otherwise hang every rank forever.
//
// Ownership: the engine borrows the communicator (and the optional trace recorder), which
// must outlive it. The destructor drains the queue (bounded by the same timeout) and joins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "comm/byte_model.h"
#include "comm/comm_queue.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "core/trace.h"

namespace sparq::comm {

namespace detail {
struct TaskState;
}

struct CommEngineOptions {
  double timeout_s = 300.0;        // bound on every wait (and on draining at destruction)
  std::string name = "comm";       // names the engine in messages
  TraceRecorder* trace = nullptr;  // when set, each task is recorded as a kCommunication span
};

class CommEngine final : public CommQueue {
 public:
  using Options = CommEngineOptions;
  using CommQueue::submit;

  explicit CommEngine(Communicator& comm, Options options = {});
  ~CommEngine();
  CommEngine(const CommEngine&) = delete;
  CommEngine& operator=(const CommEngine&) = delete;

  // `name` and `step` identify the task in timeouts, traces and errors ("allreduce bucket 3").
  CommHandle submit(std::string name, std::int64_t step, Task task) override;
  // Blocks until the task is done (bounded, see above). Returns its Status or rethrows its
  // exception. Precondition: the handle came from this engine.
  Status wait(const CommHandle& handle) override;
  // Waits for every task submitted so far, then reports the failures wait() did not (Note
  // [What wait_all reports], comm_queue.h).
  Status wait_all() override;

  std::size_t in_flight() const override;  // submitted and not yet done
  Communicator& communicator() const override { return comm_; }
  const std::string& queue_name() const override { return options_.name; }
  const Options& options() const { return options_; }

 private:
  void worker(int openmp_threads);
  [[noreturn]] void timed_out(const detail::TaskState& task, std::unique_lock<std::mutex>& lock);
  Status report(detail::TaskState& task);

  Communicator& comm_;
  Options options_;
  mutable std::mutex mutex_;
  std::condition_variable queue_cv_;
  std::condition_variable done_cv_;
  std::deque<std::shared_ptr<detail::TaskState>> queue_;
  std::vector<std::shared_ptr<detail::TaskState>> unreported_;  // submitted, not yet waited
  std::shared_ptr<detail::TaskState> running_;
  detail::AbandonedQueue abandoned_;  // the engine thread's alone
  std::uint64_t next_sequence_ = 0;
  std::size_t in_flight_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every other member is ready
};

}  // namespace sparq::comm
