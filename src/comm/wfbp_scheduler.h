// Wait-free backprop (WFBP) scheduler: launches each gradient bucket on a CommQueue (the
// thread engine on the CPU, the stream engine on the GPU; comm_queue.h) as soon as backward
// has produced all of its gradients, so communication of late layers
// overlaps with backward of early ones (see DESIGN.md, "One iteration", steps 3-5).
//
// Per step:
//   begin_step(step, communicate)   resets readiness; communicate=false for the non-final
//                                   micro-batches of gradient accumulation (nothing is sent)
//   on_grads_ready(tensor_range)    from the model's backward callback, once per tensor
//                                   (the range must be exactly one tensor's elements)
//   on_backward_done()              backward finished (launches everything in the
//                                   non-overlapping baseline mode; checks completeness)
//   submit_tail(name, fn)           optional, after on_backward_done(): one more task that
//                                   runs after every bucket (the tied embedding's sparse rows)
//   wait_all()                      blocks until every bucket is back; fills step_stats()
//
// Note [Readiness launch order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A bucket is submitted the moment its last
// gradient is reported, so buckets launch in the order in which they become complete, dense
// and compressed ones interleaved; a bucket that completes in the middle of a report is
// submitted before the next one. That order is a function of the SEQUENCE of on_grads_ready()
// calls alone, never of their timing, and every rank runs the same backward code, so every
// rank submits the same buckets in the same order (Note [Rank-identical collective order],
// communicator.h). The baseline mode (overlap: false) holds the buckets until backward ends
// and then submits them in that same readiness order.
// This departs from DESIGN.md's step 4, which launches a complete bucket only once every
// earlier-index bucket has launched: the buckets that complete early out of index order
// (dense buckets of parameters placed last, the split tied embedding's LM-head share, which
// is ready right after the head's backward) would wait for the whole backward there, and
// their overlap is the reason they exist. The invariant DESIGN.md draws from the rule, the
// same buckets in the same order on every rank, holds as argued above.
//
// The scheduler does not know how a bucket is averaged: its BucketAverager (in the trainer,
// compress::GradientExchange: error feedback, compression, the aggregation strategy,
// decompression and averaging in place) runs inside the queue's task for the bucket, on the
// engine thread (CPU) or enqueuing on the communication stream (GPU). A reader goes
// scheduler -> exchange -> aggregator -> compressor. Threading: all methods are called from
// the compute thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/bucket_averager.h"
#include "comm/bucket_plan.h"
#include "comm/comm_queue.h"
#include "core/status.h"

namespace sparq::comm {

struct BucketTiming {
  int index = 0;
  std::int64_t ready_us = 0;    // the last gradient of the bucket was reported
  std::int64_t enqueue_us = 0;  // submitted to the engine
  std::int64_t start_us = 0;    // the engine started the exchange
  std::int64_t end_us = 0;      // the averaged gradient is back in place
  WireBytes bytes;
};

struct StepCommStats {
  std::int64_t step = 0;
  bool communicated = false;
  // When backward ended: the producer's mark (CommQueue::mark_producer): on a GPU when its
  // kernels finished, not when the host had enqueued them.
  std::int64_t backward_end_us = 0;
  std::int64_t wait_end_us = 0;
  std::vector<int> launch_order;  // bucket indices in submission order (readiness order)
  double comm_busy_ms = 0;  // sum of the buckets' exchange durations
  double hidden_ms = 0;     // the part of comm_busy_ms that ran before backward ended
  double exposed_ms = 0;    // wait after backward ended, until the last bucket was back
  double hidden_fraction() const { return comm_busy_ms > 0 ? hidden_ms / comm_busy_ms : 0.0; }
  // A blocking control collective of the step outside the buckets (the trainer's stop poll,
  // BERT's target count): communication no compute hides, so exposed and busy both. Its
  // bytes are the communicator's count (Communicator::bytes_since): the callers' own figure
  // (n sent, n received) fell short of the ring's 2(P-1)/P n from three ranks on (review,
  // 2026-12-07).
  void add_exposed_control(double ms, const ByteCounters& bytes) {
    exposed_ms += ms;
    comm_busy_ms += ms;
    bytes_sent += bytes.sent;
    bytes_received += bytes.received;
  }
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::vector<BucketTiming> buckets;
  std::optional<BucketTiming> tail;  // submit_tail()'s task (index -1), when there was one
};

class WfbpScheduler {
 public:
  using TailFn = std::function<Status(Communicator&)>;

  struct Options {
    // false: hold every bucket until on_backward_done() (the "communicate after backward"
    // baseline that overlap is measured against). Launch order is the same either way.
    bool overlap = true;
  };

  // The plan, the queue and the averager must outlive the scheduler.
  WfbpScheduler(const BucketPlan& plan, CommQueue& queue, BucketAverager& averager,
                Options options);
  WfbpScheduler(const BucketPlan& plan, CommQueue& queue, BucketAverager& averager)
      : WfbpScheduler(plan, queue, averager, Options{}) {}

  void begin_step(std::int64_t step, bool communicate = true);
  void on_grads_ready(ParamRange tensor_range);
  void on_backward_done();
  // One task after every bucket of this step, on the same queue (so it runs after them,
  // FIFO): for work that needs the averaged buckets in place, such as adding the tied
  // embedding's exchanged sparse rows. Its time and bytes count as the step's communication.
  void submit_tail(std::string name, TailFn fn);
  Status wait_all();
  // After on_backward_done(): makes `consumer` (a cudaStream_t) wait for every bucket of the
  // step and the tail without blocking the host, when the queue can (CommQueue::gate); false
  // when it cannot. wait_all() still follows, for the statistics and failures.
  bool gate(void* consumer);

  const StepCommStats& step_stats() const { return stats_; }
  const BucketPlan& plan() const { return plan_; }

 private:
  void launch(int bucket);

  const BucketPlan& plan_;
  CommQueue& queue_;
  BucketAverager& averager_;
  Options options_;
  std::int64_t step_ = 0;
  bool communicate_ = true;
  bool backward_done_ = false;
  bool waited_ = true;  // the last communicating step's wait_all() has run
  int launched_ = 0;
  std::vector<int> held_;            // complete buckets not yet submitted (overlap: false)
  std::vector<std::int64_t> ready_;  // reported elements per bucket
  std::vector<CommHandle> handles_;
  std::optional<CommHandle> tail_;
  CommQueue::Mark backward_mark_;
  StepCommStats stats_;
};

}  // namespace sparq::comm
