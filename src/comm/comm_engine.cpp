#include "comm/comm_engine.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/log.h"
#include "core/threading.h"
#include "core/timer.h"

namespace sparq::comm {
namespace {

// The deadline `timeout_s` from now, at most 1e9 s (about 31 years) away: steady_clock counts
// integer nanoseconds, and now + 1e19 s overflowed, so wait_until returned at once and the
// wait loops spun holding the mutex (review).
std::chrono::steady_clock::time_point deadline_after(double timeout_s) {
  const double capped = std::min(timeout_s, 1e9);
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(capped));
}

}  // namespace

namespace detail {

// One submitted task. Fields written by the engine thread are published to waiters under the
// engine mutex; the timestamps are atomics so that handles can be polled without it.
struct TaskState final : QueuedTask {
  CommEngine::Task body;
  std::atomic<std::int64_t> enqueue_us{0};
  std::atomic<std::int64_t> start_us{0};
  std::atomic<std::int64_t> end_us{0};
  std::atomic<bool> finished{false};
  Status status;                 // valid once finished
  std::exception_ptr exception;  // valid once finished
  WireBytes wire;                // valid once finished
  bool reported = false;         // its failure was already returned by a wait (engine mutex)

  bool started() const override { return start_us.load() != 0; }
  bool done() const override { return finished.load(std::memory_order_acquire); }
  TaskTimes times() const override { return {enqueue_us.load(), start_us.load(), end_us.load()}; }
  WireBytes bytes() const override {
    SPARQ_CHECK(done(), "CommHandle::bytes() of task '{}' before it finished", name);
    return wire;
  }
};

}  // namespace detail

using detail::TaskState;

CommEngine::CommEngine(Communicator& comm, Options options)
    : comm_(comm), options_(std::move(options)) {
  SPARQ_CHECK(options_.timeout_s > 0, "CommEngine '{}': timeout_s must be positive, got {}",
              options_.name, options_.timeout_s);
  thread_ = std::thread([this, threads = max_threads()] { worker(threads); });
}

CommEngine::~CommEngine() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stop_ = true;
    queue_cv_.notify_all();
    // Draining is bounded like any wait: a task stuck in a collective must not hang exit. The
    // bound is per task, as wait()'s is: several slow tasks that each progress (over an
    // emulated slow link) tripped one deadline for all of them and were blamed on a peer
    // that never joined (review, 2026-12-06).
    auto deadline = deadline_after(options_.timeout_s);
    std::size_t left = in_flight_;
    while (in_flight_ > 0) {
      if (done_cv_.wait_until(lock, deadline) == std::cv_status::timeout && in_flight_ == left) {
        timed_out(running_ ? *running_ : *queue_.front(), lock);
      }
      if (in_flight_ < left) {
        left = in_flight_;
        deadline = deadline_after(options_.timeout_s);
      }
    }
    for (const auto& task : unreported_) {
      if (!task->reported && (!task->status.is_ok() || task->exception)) {
        spdlog::warn("CommEngine '{}': task '{}' (step {}) failed and was never waited on",
                     options_.name, task->name, task->step);
      }
    }
  }
  thread_.join();
}

CommHandle CommEngine::submit(std::string name, std::int64_t step, Task task) {
  SPARQ_CHECK(task != nullptr, "CommEngine '{}': submit('{}') without a task body", options_.name,
              name);
  auto state = std::make_shared<TaskState>();
  state->owner = this;
  state->name = std::move(name);
  state->step = step;
  state->body = std::move(task);
  state->enqueue_us = now_us();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    SPARQ_CHECK(!stop_, "CommEngine '{}': submit('{}') while shutting down", options_.name,
                state->name);
    state->sequence = next_sequence_++;
    queue_.push_back(state);
    // Keep only what wait_all() may still have to report.
    if (unreported_.size() >= 4096) {
      std::erase_if(unreported_, [](const auto& t) { return t->done() && t->reported; });
    }
    unreported_.push_back(state);
    ++in_flight_;
  }
  queue_cv_.notify_one();
  return CommHandle(std::move(state));
}

void CommEngine::worker(int openmp_threads) {
  set_num_threads(openmp_threads);
  for (;;) {
    std::shared_ptr<TaskState> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      // Stamped under the lock, so a timeout report never sees a running task without a start.
      task->start_us = now_us();
      running_ = task;
    }
    const ByteCounters before = comm_.bytes();
    Status status;
    std::exception_ptr exception;
    try {
      // Note [A task that threw ends the queue] (comm_queue.h). not_run() in the try too: a
      // std::bad_alloc of its message must not leave this thread.
      status = abandoned_.abandoned() ? abandoned_.not_run() : task->body(comm_);
    } catch (...) {
      exception = std::current_exception();
      abandoned_.thrown_by(*task, exception);
    }
    task->end_us = now_us();
    task->body = nullptr;  // release what the task captured as soon as it is done
    const ByteCounters after = comm_.bytes();
    if (options_.trace) {
      options_.trace->record({.name = task->name,
                              .category = "comm",
                              .start_us = task->start_us,
                              .end_us = task->end_us,
                              .lane = TraceLane::kCommunication,
                              .step = task->step,
                              .bytes = static_cast<std::int64_t>(after.sent - before.sent)});
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task->status = std::move(status);
      task->exception = exception;
      task->wire = {after.sent - before.sent, after.received - before.received};
      task->finished.store(true, std::memory_order_release);
      running_.reset();
      --in_flight_;
    }
    done_cv_.notify_all();
  }
}

Status CommEngine::wait(const CommHandle& handle) {
  SPARQ_CHECK(handle.valid(), "CommEngine '{}': wait() on an invalid handle", options_.name);
  SPARQ_CHECK(handle.owner() == this, "CommEngine '{}': wait('{}') on another queue's handle",
              options_.name, handle.name());
  TaskState& task = handle.record<TaskState>();
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = deadline_after(options_.timeout_s);
  while (!task.done()) {
    if (done_cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        !task.done()) {
      timed_out(task, lock);
    }
  }
  return report(task);
}

Status CommEngine::wait_all() {
  std::vector<std::shared_ptr<TaskState>> tasks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks.swap(unreported_);
  }
  // FIFO: once the last one is done, all are; waiting in order keeps the timeout per task.
  detail::UnreportedFailures failures;
  for (const auto& task : tasks) {
    CommHandle handle(task);
    bool fresh = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fresh = !task->reported;
    }
    Status status;
    std::exception_ptr exception;
    try {
      status = wait(handle);
    } catch (...) {
      exception = std::current_exception();
    }
    if (fresh) failures.add(*task, status, exception);
  }
  return failures.report(options_.name);  // Note [What wait_all reports] (comm_queue.h)
}

Status CommEngine::report(TaskState& task) {
  // Called with the engine mutex held.
  task.reported = true;
  if (task.exception) std::rethrow_exception(task.exception);
  return task.status;
}

std::size_t CommEngine::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_;
}

void CommEngine::timed_out(const TaskState& task, std::unique_lock<std::mutex>& lock) {
  const std::int64_t now = now_us();
  std::string state;
  if (task.start_us.load() != 0) {
    state = fmt::format("it has been running for {:.3f} s", (now - task.start_us.load()) * 1e-6);
  } else if (running_) {
    state = fmt::format("it is still queued behind task '{}' (step {}, #{}), running for {:.3f} s",
                        running_->name, running_->step, running_->sequence,
                        (now - running_->start_us.load()) * 1e-6);
  } else {
    state = "it never started";
  }
  const std::string message = fmt::format(
      "CommEngine '{}': task '{}' (step {}, #{}) did not finish within {} s on rank {} of {}; "
      "{}; {} task(s) queued. A peer rank probably never joined this collective.",
      options_.name, task.name, task.step, task.sequence, options_.timeout_s, comm_.rank(),
      comm_.size(), state, queue_.size());
  lock.unlock();
  SPARQ_FATAL("{}", message);
}

}  // namespace sparq::comm
