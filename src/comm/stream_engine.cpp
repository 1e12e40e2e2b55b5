#include "comm/stream_engine.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/log.h"
#include "core/timer.h"

namespace sparq::comm {
namespace detail {

struct StreamAnchor {
  cuda::Event event{/*timing=*/true};
  std::int64_t host_us = 0;
};

// One submitted task. Everything is touched by the engine's single calling thread (see the
// header), so nothing here is atomic. The GPU times are a cache filled in the first time the
// end event is seen complete (fix_times), hence mutable.
struct StreamTask final : QueuedTask {
  cuda::Event start{/*timing=*/true};
  cuda::Event end{/*timing=*/true};
  mutable std::shared_ptr<const StreamAnchor> anchor;  // released once the times are known
  mutable TaskTimes known;
  mutable bool timed = false;  // start_us and end_us are known
  bool traced = false;         // its span was handed to the trace recorder
  bool reported = false;       // its outcome was returned by a wait
  Status status;
  std::exception_ptr exception;
  WireBytes wire;

  bool failed() const { return exception != nullptr || !status.is_ok(); }
  bool started() const override { return done(); }  // the GPU's start is seen with its end
  bool done() const override { return timed || end.ready(); }
  TaskTimes times() const override;
  WireBytes bytes() const override { return wire; }  // counted at enqueue
};

namespace {

std::int64_t anchored_us(const StreamAnchor& anchor, const cuda::Event& event) {
  return anchor.host_us +
         std::llround(static_cast<double>(event.elapsed_ms_since(anchor.event)) * 1e3);
}

// Converts the task's GPU times to the host clock. Precondition: its end event has completed
// (so has its start event, earlier on the same stream). The anchor is seen complete a little
// after it really completed, so estimates can only be late; the clamps keep the order
// enqueue <= start <= end that the GPU guarantees against float rounding.
void fix_times(const StreamTask& task) {
  if (task.timed) return;
  const StreamAnchor& anchor = *task.anchor;
  task.known.start_us = std::max(task.known.enqueue_us, anchored_us(anchor, task.start));
  task.known.end_us = std::max(task.known.start_us, anchored_us(anchor, task.end));
  task.timed = true;
  task.anchor.reset();
}

}  // namespace

TaskTimes StreamTask::times() const {
  if (!timed && end.ready()) fix_times(*this);
  return known;
}

}  // namespace detail

using detail::StreamAnchor;
using detail::StreamTask;

StreamCommEngine::StreamCommEngine(NcclCommunicator& comm, Options options)
    : comm_(comm), options_(std::move(options)), was_synchronous_(comm.synchronous()) {
  SPARQ_CHECK(options_.timeout_s > 0, "StreamCommEngine '{}': timeout_s must be positive, got {}",
              options_.name, options_.timeout_s);
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  SPARQ_CHECK(device == comm_.cuda_device(),
              "StreamCommEngine '{}': the current CUDA device is {} but the communicator's is {}",
              options_.name, device, comm_.cuda_device());
  comm_.set_synchronous(false);
  anchor_ = make_anchor();
}

StreamCommEngine::~StreamCommEngine() {
  for (const auto& task : outstanding_) {
    complete(*task);
    if (!task->reported && task->failed()) {
      spdlog::warn("StreamCommEngine '{}': task '{}' (step {}) failed and was never waited on",
                   options_.name, task->name, task->step);
    }
  }
  comm_.set_synchronous(was_synchronous_);
}

std::shared_ptr<const StreamAnchor> StreamCommEngine::make_anchor() const {
  const cudaStream_t stream = comm_.stream();
  cuda::Event drained;
  drained.record(stream);
  comm_.wait_event(drained.get(),
                   fmt::format("StreamCommEngine '{}': draining the stream", options_.name),
                   options_.timeout_s);
  // On the now idle stream the reference completes at once; spinning (not sleeping) notes
  // that moment within microseconds.
  auto anchor = std::make_shared<StreamAnchor>();
  anchor->event.record(stream);
  while (!anchor->event.ready()) std::this_thread::yield();
  anchor->host_us = now_us();
  return anchor;
}

CommHandle StreamCommEngine::submit(std::string name, std::int64_t step, Task task) {
  SPARQ_CHECK(task != nullptr, "StreamCommEngine '{}': submit('{}') without a task body",
              options_.name, name);
  return submit(std::move(name), step,
                NcclTask([body = std::move(task)](NcclCommunicator& c) { return body(c); }),
                options_.producer);
}

CommHandle StreamCommEngine::submit(std::string name, std::int64_t step, NcclTask task,
                                    cudaStream_t producer) {
  SPARQ_CHECK(task != nullptr, "StreamCommEngine '{}': submit('{}') without a task body",
              options_.name, name);
  auto state = std::make_shared<StreamTask>();
  state->owner = this;
  state->name = std::move(name);
  state->step = step;
  state->sequence = next_sequence_++;
  state->anchor = anchor_;
  state->known.enqueue_us = now_us();
  const cudaStream_t stream = comm_.stream();
  if (producer != stream) {
    // cudaStreamWaitEvent captures the event's latest record, so ready_ can be re-recorded by
    // the next submit without loosening this gate.
    ready_.record(producer);
    ready_.gate(stream);
  }
  state->start.record(stream);
  const ByteCounters before = comm_.bytes();
  try {
    // Note [A task that threw ends the queue] (comm_queue.h); not_run() inside the try, as in
    // CommEngine::worker.
    state->status = abandoned_.abandoned() ? abandoned_.not_run() : task(comm_);
  } catch (...) {
    state->exception = std::current_exception();
    abandoned_.thrown_by(*state, state->exception);
  }
  const ByteCounters after = comm_.bytes();
  // Recorded even after a failure, so that waits and gated streams see the task finish.
  state->end.record(stream);
  state->wire = {after.sent - before.sent, after.received - before.received};
  // Keep only what wait_all() may still have to wait for or report.
  if (outstanding_.size() >= 4096) {
    std::erase_if(outstanding_, [](const auto& t) { return t->timed && t->traced && t->reported; });
  }
  outstanding_.push_back(state);
  return CommHandle(std::move(state));
}

std::string StreamCommEngine::describe_wait(const StreamTask& task) const {
  std::string what = fmt::format("StreamCommEngine '{}': task '{}' (step {}, #{})", options_.name,
                                 task.name, task.step, task.sequence);
  // In FIFO order a task behind a stalled collective stalls too: name the oldest one ahead.
  for (const auto& earlier : outstanding_) {
    if (earlier->sequence >= task.sequence) break;
    if (!earlier->timed && !earlier->end.ready()) {
      what += fmt::format(
          ", queued behind task '{}' (step {}, #{}) that was unfinished when the "
          "wait began,",
          earlier->name, earlier->step, earlier->sequence);
      break;
    }
  }
  return what;
}

void StreamCommEngine::complete(StreamTask& task) {
  if (!task.timed && !task.end.ready()) {
    comm_.wait_event(task.end.get(), describe_wait(task), options_.timeout_s);
  }
  detail::fix_times(task);
  if (options_.trace != nullptr && !task.traced) {
    options_.trace->record({.name = task.name,
                            .category = "comm",
                            .start_us = task.known.start_us,
                            .end_us = task.known.end_us,
                            .lane = TraceLane::kCommunication,
                            .step = task.step,
                            .bytes = static_cast<std::int64_t>(task.wire.sent)});
  }
  task.traced = true;
}

Status StreamCommEngine::report(StreamTask& task) {
  task.reported = true;
  if (task.exception) std::rethrow_exception(task.exception);
  return task.status;
}

StreamTask& StreamCommEngine::own(const CommHandle& handle, const char* what) const {
  SPARQ_CHECK(handle.valid(), "StreamCommEngine '{}': {}() on an invalid handle", options_.name,
              what);
  SPARQ_CHECK(handle.owner() == this, "StreamCommEngine '{}': {}('{}') on another queue's handle",
              options_.name, what, handle.name());
  return handle.record<StreamTask>();
}

Status StreamCommEngine::wait(const CommHandle& handle) {
  StreamTask& task = own(handle, "wait");
  complete(task);
  return report(task);
}

Status StreamCommEngine::wait_all() {
  std::vector<std::shared_ptr<StreamTask>> tasks;
  tasks.swap(outstanding_);
  // FIFO: waiting in order bounds each task by its own timeout and names the oldest stall.
  detail::UnreportedFailures failures;
  for (const auto& task : tasks) {
    complete(*task);
    if (task->reported) continue;
    task->reported = true;
    failures.add(*task, task->status, task->exception);
  }
  // Idle now: a fresh anchor keeps the next tasks' float elapsed times short and precise.
  if (!tasks.empty()) anchor_ = make_anchor();
  return failures.report(options_.name);  // Note [What wait_all reports] (comm_queue.h)
}

void StreamCommEngine::wait_on_stream(const CommHandle& handle, cudaStream_t consumer) const {
  own(handle, "wait_on_stream").end.gate(consumer);
}

cudaEvent_t StreamCommEngine::end_event(const CommHandle& handle) const {
  return own(handle, "end_event").end.get();
}

CommQueue::Mark StreamCommEngine::mark_producer() {
  auto mark = std::make_shared<cuda::Event>(/*timing=*/true);
  mark->record(options_.producer);
  return [this, mark, anchor = anchor_] {
    if (!mark->ready()) {
      comm_.wait_event(
          mark->get(),
          fmt::format("StreamCommEngine '{}': a mark on the producer stream", options_.name),
          options_.timeout_s);
    }
    return detail::anchored_us(*anchor, *mark);
  };
}

std::size_t StreamCommEngine::in_flight() const {
  return static_cast<std::size_t>(
      std::count_if(outstanding_.begin(), outstanding_.end(),
                    [](const auto& t) { return !t->timed && !t->end.ready(); }));
}

}  // namespace sparq::comm
