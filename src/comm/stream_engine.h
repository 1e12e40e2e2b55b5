// StreamCommEngine: the CUDA-stream flavour of CommQueue (comm_queue.h; the host-thread one is
// CommEngine, comm_engine.h), for NCCL.
//
// Tasks run in FIFO order on the NCCL communicator's own stream, off the compute stream:
// submit() records a "ready" event on the producer (compute) stream, makes the communicator's
// stream wait for it, records a start event, runs the task body, then records an end event.
// The body runs on the CALLING thread but only ENQUEUES work (NCCL calls, kernels, copies) on
// comm.stream(): with the communicator in asynchronous mode (set_synchronous(false), set for
// the engine's lifetime) each call returns once enqueued. Enqueueing is cheap and the stream
// already executes in issue order, so a host thread would add a hand-off and a context switch
// per task and buy nothing; it would also put a second thread on a communicator that allows
// one. A rank's NCCL calls thus follow its submission order (Note [Rank-identical collective
// order], communicator.h).
//
// Producers: submit() through the CommQueue interface gates the task on Options::producer (the
// compute stream whose kernels wrote the gradients: the event recorded there at submit is
// "after the bucket's last layer's backward", since the scheduler submits a bucket as soon as
// that layer reported); the NCCL overload names the producer per call.
//
// Results of a task are valid once it is done: wait() blocks the host until then; for the
// compute stream, wait_on_stream() makes that stream wait for the task's end event without
// blocking the host (the "gated by events" path of an optimizer that consumes gradients).
//
// Errors: a body that returns a failed Status or throws is captured at submit; wait()
// returns that Status or rethrows the exception (same object, original message) once the
// task's stream work is done. The end event is recorded even then, so later tasks and gated
// streams never wait forever on this rank; what the body had enqueued before failing still
// runs. After a throw no later task's body runs (Note [A task that threw ends the queue],
// comm_queue.h). wait_all() reports the failures wait() did not (Note [What wait_all
// reports], comm_queue.h).
//
// Timeouts: every wait is bounded by Options::timeout_s and polls NCCL's asynchronous error
// state (NcclCommunicator::wait_event). On expiry or an asynchronous NCCL error the NCCL
// communicator is aborted and the job ends through SPARQ_FATAL (MPI_Abort) with a message
// naming this rank, the engine, the task, its step and the oldest earlier task still
// unfinished when the wait began (in FIFO order that one is usually the stalled collective).
//
// Times (TaskTimes, on the now_us() clock of core/timer.h like CommEngine's): enqueue_us is
// the host time at submit; start_us and end_us come from the GPU: the elapsed time between
// the task's events and a reference event, added to the host time at which that reference
// was seen complete. They are known once the task is done (0 before). The anchor is renewed
// whenever wait_all() leaves the engine idle, because cudaEventElapsedTime returns float
// milliseconds, whose resolution decays with the distance to the reference. Bytes are what
// the body's calls added to the communicator's counters, known as soon as submit returns.
//
// Threading: NOT thread-safe. Call submit/wait/wait_all from one thread at a time (normally
// the compute thread): bodies run on the caller and the communicator is single-threaded.
// Preconditions: the current CUDA device is comm.cuda_device(); nobody else enqueues work on
// comm.stream() while the engine lives (that would serialise with, and be timed into, tasks).
//
// Ownership: borrows the communicator (and the optional trace recorder), which must outlive
// the engine. The destructor waits for every task (bounded by the same timeout), records the
// remaining trace spans and restores the communicator's previous synchronous mode.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "comm/byte_model.h"
#include "comm/comm_engine.h"
#include "comm/nccl_communicator.h"
#include "core/cuda/cuda_handles.h"
#include "core/status.h"
#include "core/trace.h"

namespace sparq::comm {

namespace detail {
struct StreamTask;
struct StreamAnchor;  // a reference event and the host time at which it was seen complete
}  // namespace detail

// Handles are the queue's (comm_queue.h); the name is kept for readers of the GPU code.
using StreamCommHandle = CommHandle;

struct StreamCommEngineOptions {
  double timeout_s = 300.0;        // bound on every wait (and on draining at destruction)
  std::string name = "comm";       // names the engine in messages
  TraceRecorder* trace = nullptr;  // when set, each task becomes a kCommunication span
  // What CommQueue::submit gates each task on: the compute stream that produced its inputs
  // (nullptr is CUDA's legacy default stream).
  cudaStream_t producer = nullptr;
};

class StreamCommEngine final : public CommQueue {
 public:
  using Options = StreamCommEngineOptions;
  // Enqueues the task's work on comm.stream() and returns without waiting for it.
  using NcclTask = std::function<Status(NcclCommunicator&)>;
  using CommQueue::submit;

  explicit StreamCommEngine(NcclCommunicator& comm, Options options = {});
  ~StreamCommEngine();
  StreamCommEngine(const StreamCommEngine&) = delete;
  StreamCommEngine& operator=(const StreamCommEngine&) = delete;

  // The queue interface: gated on Options::producer.
  CommHandle submit(std::string name, std::int64_t step, Task task) override;
  // `name` and `step` identify the task in timeouts, traces and errors. The task's stream work
  // starts after everything enqueued on `producer` so far (the compute stream that wrote its
  // inputs; 0 is the legacy default stream; comm.stream() itself needs no gate).
  CommHandle submit(std::string name, std::int64_t step, NcclTask task, cudaStream_t producer);
  template <typename F>
  requires std::is_void_v<std::invoke_result_t<F&, NcclCommunicator&>> CommHandle
  submit(std::string name, std::int64_t step, F&& body, cudaStream_t producer) {
    return submit(std::move(name), step,
                  NcclTask([fn = std::forward<F>(body)](NcclCommunicator& c) mutable {
                    fn(c);
                    return Status::ok();
                  }),
                  producer);
  }

  // Blocks the host until the task is done (bounded, see above). Returns its Status or
  // rethrows its exception. Precondition: the handle came from this engine.
  Status wait(const CommHandle& handle) override;
  // Waits for every task submitted so far, in FIFO order; returns the first failure not yet
  // reported by wait() (rethrowing an exception) after all of them are done.
  Status wait_all() override;
  // Makes `consumer` wait for the task without blocking the host. Its failure, if any, is
  // still reported only by wait()/wait_all(), which the caller must call eventually.
  void wait_on_stream(const CommHandle& handle, cudaStream_t consumer) const;
  // Completes when the task's stream work has (for cudaStreamWaitEvent / cudaEventQuery).
  cudaEvent_t end_event(const CommHandle& handle) const;

  // The queue's form of wait_on_stream: always possible here.
  bool gate(const CommHandle& handle, void* consumer) override {
    wait_on_stream(handle, static_cast<cudaStream_t>(consumer));
    return true;
  }
  // When the producer stream has run what it was given so far (an event recorded there, on
  // the host clock through the engine's anchor like the tasks' times).
  Mark mark_producer() override;
  // Submitted since the last wait_all and not yet done.
  std::size_t in_flight() const override;
  NcclCommunicator& communicator() const override { return comm_; }
  const std::string& queue_name() const override { return options_.name; }
  cudaStream_t stream() const { return comm_.stream(); }
  const Options& options() const { return options_; }

 private:
  // Drains comm.stream(), then records a reference event on it and notes when it completes.
  std::shared_ptr<const detail::StreamAnchor> make_anchor() const;
  // Blocks until the task's end event completes, then fixes its times and records its span
  // (once). Ends the job on a timeout or an asynchronous NCCL error.
  void complete(detail::StreamTask& task);
  std::string describe_wait(const detail::StreamTask& task) const;
  // The handle's record, checked to come from this engine (`what` names the caller).
  detail::StreamTask& own(const CommHandle& handle, const char* what) const;
  Status report(detail::StreamTask& task);

  NcclCommunicator& comm_;
  Options options_;
  bool was_synchronous_;
  cuda::Event ready_;  // recorded on the producer and waited on at once, so one is enough
  std::shared_ptr<const detail::StreamAnchor> anchor_;
  std::vector<std::shared_ptr<detail::StreamTask>> outstanding_;  // since the last wait_all
  detail::AbandonedQueue abandoned_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace sparq::comm
