#include "comm/wfbp_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "core/check.h"
#include "core/timer.h"

namespace sparq::comm {
namespace {

// What a misuse error says of a bucket: its tensors (the scheduler counts elements, not which
// tensor they came from, so it cannot say which one is short; naming only the first tensor
// pointed at one that had been reported, review 2026-12-06).
std::string tensor_list(const Bucket& bucket) {
  constexpr std::size_t kShown = 4;
  std::string list = "tensors ";
  for (std::size_t i = 0; i < bucket.tensors.size() && i < kShown; ++i) {
    list += fmt::format("{}'{}'", i ? ", " : "", bucket.tensors[i]);
  }
  if (bucket.tensors.size() > kShown) {
    list += fmt::format(" and {} more", bucket.tensors.size() - kShown);
  }
  return list;
}

}  // namespace

WfbpScheduler::WfbpScheduler(const BucketPlan& plan, CommQueue& queue, BucketAverager& averager,
                             Options options)
    : plan_(plan),
      queue_(queue),
      averager_(averager),
      options_(options),
      ready_(plan.size(), 0),
      handles_(plan.size()) {}

void WfbpScheduler::begin_step(std::int64_t step, bool communicate) {
  SPARQ_CHECK(launched_ == 0 || launched_ == static_cast<int>(plan_.size()),
              "begin_step({}) while step {} still has unlaunched buckets", step, step_);
  // Its buckets may still be averaging the gradients this step's backward is about to
  // overwrite, and their failures would surface in another step's wait_all() (review).
  SPARQ_CHECK(waited_, "begin_step({}) before wait_all() of step {}", step, step_);
  step_ = step;
  communicate_ = communicate;
  waited_ = !communicate;
  backward_done_ = false;
  launched_ = 0;
  held_.clear();
  tail_.reset();
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(handles_.begin(), handles_.end(), CommHandle{});
  stats_ = StepCommStats{};
  stats_.launch_order.reserve(plan_.size());
  stats_.step = step;
  stats_.communicated = communicate;
  stats_.buckets.assign(plan_.size(), BucketTiming{});
  for (std::size_t b = 0; b < plan_.size(); ++b) stats_.buckets[b].index = static_cast<int>(b);
}

void WfbpScheduler::on_grads_ready(ParamRange tensor_range) {
  if (!communicate_) return;
  SPARQ_CHECK(!backward_done_, "gradients reported after on_backward_done() in step {}", step_);
  const std::int64_t now = now_us();
  for (auto [b, count] : plan_.overlaps(tensor_range)) {
    ready_[b] += count;
    const Bucket& bucket = plan_.buckets()[b];
    SPARQ_CHECK(ready_[b] <= bucket.ready_count,
                "bucket {} ({}) got {} of {} gradient elements in step {}: a tensor was "
                "reported twice",
                b, tensor_list(bucket), ready_[b], bucket.ready_count, step_);
    if (ready_[b] != bucket.ready_count) continue;
    // Complete: submitted now, in readiness order (Note [Readiness launch order]).
    stats_.buckets[b].ready_us = now;
    if (options_.overlap) {
      launch(b);
    } else {
      held_.push_back(b);
    }
  }
}

void WfbpScheduler::launch(int b) {
  const Bucket& bucket = plan_.buckets()[b];
  ++launched_;
  stats_.launch_order.push_back(b);
  stats_.buckets[b].enqueue_us = now_us();
  handles_[b] = queue_.submit(fmt::format("bucket {}", b), step_,
                              CommQueue::Task([this, &bucket, step = step_](Communicator& comm) {
                                return averager_.average_bucket(comm, bucket, step);
                              }));
}

void WfbpScheduler::on_backward_done() {
  stats_.backward_end_us = now_us();
  backward_done_ = true;
  if (!communicate_) return;
  backward_mark_ = queue_.mark_producer();
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    const Bucket& bucket = plan_.buckets()[b];
    SPARQ_CHECK(ready_[b] == bucket.ready_count,
                "backward of step {} ended but bucket {} ({}) has {} of {} gradient elements: "
                "the model did not report every parameter",
                step_, b, tensor_list(bucket), ready_[b], bucket.ready_count);
  }
  for (int b : held_) launch(b);
  held_.clear();
}

void WfbpScheduler::submit_tail(std::string name, TailFn fn) {
  SPARQ_CHECK(backward_done_ && communicate_ && !tail_,
              "submit_tail('{}') in step {} needs a communicating step whose backward ended, "
              "and at most one tail", name, step_);
  tail_ = queue_.submit(std::move(name), step_, CommQueue::Task(std::move(fn)));
}

bool WfbpScheduler::gate(void* consumer) {
  SPARQ_CHECK(backward_done_, "gate() before on_backward_done() in step {}", step_);
  if (!communicate_) return true;
  for (int b : stats_.launch_order) {
    if (!queue_.gate(handles_[b], consumer)) return false;
  }
  return !tail_ || queue_.gate(*tail_, consumer);
}

Status WfbpScheduler::wait_all() {
  SPARQ_CHECK(backward_done_, "wait_all() before on_backward_done() in step {}", step_);
  if (!communicate_) return Status::ok();
  // A task that threw (the engine rethrows it here) must not leave its successors running
  // while the caller unwinds past state they use: every task is waited for first. Then every
  // failure is reported as the engines' wait_all() reports them (Note [What wait_all
  // reports], comm_queue.h): each wait() marks its task reported, so a failure kept here
  // only as "the first" was lost for good (review, 2026-12-06: a bucket's "corrupt message"
  // vanished behind a later bucket's exception).
  detail::UnreportedFailures failures;
  const auto wait_for = [&](const auto& wait, const std::string& what) {
    Status status;
    std::exception_ptr thrown;
    try {
      status = wait();
    } catch (...) {
      thrown = std::current_exception();
    }
    failures.add(what, step_, status.is_ok() ? status : status.with_context(what), thrown);
  };
  for (int b : stats_.launch_order) {
    wait_for([&] { return queue_.wait(handles_[b]); },
             fmt::format("bucket {} of step {}", b, step_));
  }
  if (tail_) {
    wait_for([&] { return queue_.wait(*tail_); }, fmt::format("the tail task of step {}", step_));
    stats_.tail = BucketTiming{};
    stats_.tail->index = -1;
  }
  // Every task of the step is waited for, so this reports nothing new; it lets the queue see
  // itself idle, where a stream engine re-anchors its event clock (its float elapsed times
  // would otherwise grow coarse over a long run).
  stats_.wait_end_us = now_us();
  wait_for([&] { return queue_.wait_all(); }, fmt::format("step {}", step_));
  waited_ = true;
  const Status first_error = failures.report("backprop scheduler");  // rethrows an exception
  stats_.backward_end_us = backward_mark_();
  std::int64_t last_end = stats_.backward_end_us;
  for (std::size_t i = 0; i <= plan_.size(); ++i) {
    const bool tail = i == plan_.size();
    if (tail && !tail_) break;
    BucketTiming& t = tail ? *stats_.tail : stats_.buckets[i];
    const CommHandle& handle = tail ? *tail_ : handles_[i];
    const TaskTimes times = handle.times();
    t.start_us = times.start_us;
    t.end_us = times.end_us;
    t.bytes = handle.bytes();
    stats_.bytes_sent += t.bytes.sent;
    stats_.bytes_received += t.bytes.received;
    stats_.comm_busy_ms += static_cast<double>(t.end_us - t.start_us) / 1e3;
    const std::int64_t hidden_end = std::min(t.end_us, stats_.backward_end_us);
    if (hidden_end > t.start_us) stats_.hidden_ms += static_cast<double>(hidden_end - t.start_us) / 1e3;
    last_end = std::max(last_end, t.end_us);
  }
  stats_.exposed_ms = static_cast<double>(last_end - stats_.backward_end_us) / 1e3;
  return first_error;
}

}  // namespace sparq::comm
