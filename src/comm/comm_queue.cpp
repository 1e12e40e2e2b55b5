#include "comm/comm_queue.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "core/check.h"
#include "core/log.h"
#include "core/timer.h"

namespace sparq::comm {

detail::QueuedTask& CommHandle::checked(const char* what) const {
  SPARQ_CHECK(task_ != nullptr, "CommHandle::{}() on an invalid handle", what);
  return *task_;
}

namespace detail {

namespace {

std::string exception_text(const std::exception_ptr& exception) {
  try {
    std::rethrow_exception(exception);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

constexpr std::string_view kNotRun = "not run: ";
constexpr std::string_view kNotRunTask = "not run: task '";

}  // namespace

void AbandonedQueue::thrown_by(const QueuedTask& task,
                               const std::exception_ptr& exception) noexcept {
  if (abandoned_) return;
  abandoned_ = true;  // first: the text below may not be had
  try {
    reason_ = fmt::format(
        "task '{}' (step {}) threw before it ({}), perhaps part-way through its collectives "
        "(Note [A task that threw ends the queue], comm_queue.h)",
        task.name, task.step, exception_text(exception));
  } catch (...) {
    reason_.clear();
  }
}

Status AbandonedQueue::not_run() const {
  return Status::error(
      "{}{}", kNotRun,
      reason_.empty() ? "task '?' threw before it (no memory to say more)" : reason_);
}

bool AbandonedQueue::is_not_run(const Status& status) {
  // Anywhere in the message: the scheduler prefixes its bucket ("bucket 2 of step 4: ...").
  return !status.is_ok() && status.message().find(kNotRunTask) != std::string::npos;
}

void UnreportedFailures::add(const QueuedTask& task, const Status& status,
                             std::exception_ptr exception) {
  add(task.name, task.step, status, std::move(exception));
}

void UnreportedFailures::add(std::string task, std::int64_t step, const Status& status,
                             std::exception_ptr exception) {
  if (exception || !status.is_ok()) {
    failures_.push_back({std::move(task), step, status, std::move(exception)});
  }
}

Status UnreportedFailures::report(const std::string& queue_name) {
  // Note [What wait_all reports] (comm_queue.h).
  auto reported = std::find_if(failures_.begin(), failures_.end(),
                               [](const Failure& f) { return f.exception != nullptr; });
  if (reported == failures_.end()) reported = failures_.begin();
  // The tasks not run after one threw (Note [A task that threw ends the queue]): one line.
  std::size_t not_run = 0;
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it == reported) continue;
    if (!it->exception && AbandonedQueue::is_not_run(it->status)) {
      ++not_run;
      continue;
    }
    spdlog::warn("comm queue '{}': task '{}' (step {}) also failed: {}", queue_name, it->task,
                 it->step, it->exception ? exception_text(it->exception) : it->status.message());
  }
  if (not_run > 0) {
    spdlog::warn("comm queue '{}': {} later task(s) not run after a task threw", queue_name,
                 not_run);
  }
  if (reported == failures_.end()) return Status::ok();
  const Failure failure = std::move(*reported);
  failures_.clear();
  if (failure.exception) std::rethrow_exception(failure.exception);
  return failure.status;
}

}  // namespace detail

bool CommQueue::gate(const CommHandle&, void*) { return false; }

CommQueue::Mark CommQueue::mark_producer() {
  const std::int64_t now = now_us();
  return [now] { return now; };
}

}  // namespace sparq::comm
