// CommQueue: the one interface behind which communication tasks wait their turn, whichever
// engine runs them (DESIGN.md, "The GPU path", "One queue").
//
//   CommEngine        (comm_engine.h)   a host thread that alone calls the communicator: the
//                                       CPU/MPI flavour
//   StreamCommEngine  (stream_engine.h) tasks enqueued on the NCCL communicator's stream, each
//                                       gated by an event recorded on the compute stream at
//                                       submit: the GPU flavour
//
// The WFBP scheduler, the trainer's control traffic and the gradient exchange know only this
// interface: a named task for a step is submitted, later waited for (alone, or every task so
// far), and its times and bytes are read from its handle once it is done. Either engine runs
// tasks one after another in submission order, so a rank's collectives follow its submission
// order (Note [Rank-identical collective order], communicator.h).
//
// A task is a callable taking the engine's Communicator&; it returns Status (or void) and may
// throw. wait() returns the task's Status or rethrows its exception; a failed Status does not
// stall later tasks, and after an exception none runs (Note [A task that threw ends the
// queue]). Every wait is bounded by the engine's timeout, which ends the job with a
// message naming the task and its step. Threading and what a task body may do (block, or only
// enqueue stream work) are the engine's to say.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "comm/byte_model.h"
#include "comm/communicator.h"
#include "core/status.h"

namespace sparq::comm {

// Microseconds on the now_us() clock (core/timer.h); 0 until the task reaches that point.
struct TaskTimes {
  std::int64_t enqueue_us = 0;
  std::int64_t start_us = 0;
  std::int64_t end_us = 0;
};

class CommQueue;

namespace detail {

// What a handle can read of a submitted task, whichever engine runs it. Each engine derives
// its own task record from this; the fields below are fixed at submit.
class QueuedTask {
 public:
  virtual ~QueuedTask() = default;
  virtual bool started() const = 0;
  virtual bool done() const = 0;  // finished, successfully or not
  virtual TaskTimes times() const = 0;
  // Bytes the task's calls added to the communicator's counters.
  virtual WireBytes bytes() const = 0;

  const CommQueue* owner = nullptr;  // the queue it was submitted to
  std::string name;
  std::int64_t step = 0;
  std::uint64_t sequence = 0;  // 0, 1, 2, ... in submission order
};

// Note [What wait_all reports]
// wait_all() may find several failed tasks that no wait() reported. It rethrows the first
// task's exception if any task threw (an exception is a bug or an error that could not be a
// Status, so it outranks a Status), else returns the first failed Status; every other
// failure is logged as a warning naming its task, so that none is swallowed. (Both engines
// returned the first failure of either kind and marked the rest reported: a Status failure
// followed by an exception returned the Status and the exception was never seen; review,
// 2026-12-06.)
//
// Note [A task that threw ends the queue]
// A task's failed Status comes after its collectives (a strategy finishes every exchange of
// the bucket before it returns one), so the tasks after it still run and every rank stays in
// step. An exception can leave a task's collectives half done (a std::bad_alloc between two
// of them): the later tasks' collectives would pair with the wrong calls of the peers, and
// hang until comm.timeout_s, blaming another task, or combine the wrong buffers (review,
// 2026-12-07). So once a task has thrown, a queue runs no later task: each completes at once
// with a Status that names the task that threw (AbandonedQueue), and wait_all() rethrows the
// exception itself (above) with one warning for all the tasks not run. The trainer ends the
// job on it (data_parallel.cpp), which releases the peers.
class AbandonedQueue {
 public:
  // The task that threw: from now on, nothing runs. Never throws (called in a catch block,
  // perhaps of a std::bad_alloc): without memory for its text the reason is shorter.
  void thrown_by(const QueuedTask& task, const std::exception_ptr& exception) noexcept;
  bool abandoned() const { return abandoned_; }
  // The Status of a task that was not run.
  Status not_run() const;
  static bool is_not_run(const Status& status);

 private:
  bool abandoned_ = false;
  std::string reason_;
};

class UnreportedFailures {
 public:
  // A finished task's outcome; successes are ignored.
  void add(const QueuedTask& task, const Status& status, std::exception_ptr exception);
  // The same, for an outcome known by the task's name and step (a caller of wait()).
  void add(std::string task, std::int64_t step, const Status& status, std::exception_ptr exception);
  // Logs every failure but the one reported, then rethrows it or returns it (ok if none).
  Status report(const std::string& queue_name);

 private:
  struct Failure {
    std::string task;
    std::int64_t step = 0;
    Status status;
    std::exception_ptr exception;
  };
  std::vector<Failure> failures_;
};

}  // namespace detail

// Shared, copyable reference to a submitted task. Default-constructed handles are invalid.
class CommHandle {
 public:
  CommHandle() = default;
  explicit CommHandle(std::shared_ptr<detail::QueuedTask> task) : task_(std::move(task)) {}
  bool valid() const { return task_ != nullptr; }
  bool started() const { return task_ && task_->started(); }
  bool done() const { return task_ && task_->done(); }
  TaskTimes times() const { return checked("times").times(); }
  const std::string& name() const { return checked("name").name; }
  std::int64_t step() const { return checked("step").step; }
  std::uint64_t sequence() const { return checked("sequence").sequence; }
  // Valid once done() (the stream engine knows them at submit already).
  WireBytes bytes() const { return checked("bytes").bytes(); }

  // The engine's own record of the task; `Task` must be the engine's record type (engines
  // check the owner first).
  template <typename Task>
  Task& record() const {
    return static_cast<Task&>(checked("record"));
  }
  const CommQueue* owner() const { return task_ ? task_->owner : nullptr; }

 private:
  detail::QueuedTask& checked(const char* what) const;
  std::shared_ptr<detail::QueuedTask> task_;
};

class CommQueue {
 public:
  using Task = std::function<Status(Communicator&)>;

  virtual ~CommQueue() = default;

  // `name` and `step` identify the task in timeouts, traces and errors ("bucket 3").
  virtual CommHandle submit(std::string name, std::int64_t step, Task task) = 0;
  template <typename F>
  requires std::is_void_v<std::invoke_result_t<F&, Communicator&>> CommHandle
  submit(std::string name, std::int64_t step, F&& body) {
    return submit(std::move(name), step,
                  Task([fn = std::forward<F>(body)](Communicator& c) mutable {
                    fn(c);
                    return Status::ok();
                  }));
  }

  // Blocks until the task is done (bounded). Returns its Status or rethrows its exception.
  // Precondition: the handle came from this queue.
  virtual Status wait(const CommHandle& handle) = 0;
  // Waits for every task submitted so far, then reports the failures not yet reported by
  // wait() as Note [What wait_all reports] says.
  virtual Status wait_all() = 0;
  // submit + wait: a synchronous call run by the queue.
  Status run(std::string name, std::int64_t step, Task task) {
    return wait(submit(std::move(name), step, std::move(task)));
  }

  // Makes `consumer` (a cudaStream_t) wait for the task without blocking the host, so the
  // kernels enqueued there next (the optimizer's) run once the task has; false when this
  // queue cannot (the host thread engine: wait() is the way). wait() must still follow for
  // the task's outcome, times and bytes.
  virtual bool gate(const CommHandle& handle, void* consumer);

  // A point in the producer's work, for timing (when backward really ended, say): the time,
  // on the now_us() clock, at which everything the producer had been given when mark_producer
  // was called has run. The host queue's producer is the calling thread, so its mark is the
  // time of the call; the stream engine's is its producer stream, which may get there long
  // after the host enqueued the work. Resolve the mark (call it) after waiting for a task
  // submitted after it; it may block until the producer gets there.
  using Mark = std::function<std::int64_t()>;
  virtual Mark mark_producer();

  virtual std::size_t in_flight() const = 0;  // submitted and not yet done
  virtual Communicator& communicator() const = 0;
  virtual const std::string& queue_name() const = 0;  // names the queue in messages
};

}  // namespace sparq::comm
