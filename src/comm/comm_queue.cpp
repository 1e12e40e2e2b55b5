#include "comm/comm_queue.h"

#include <algorithm>

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

}  // namespace

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
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it == reported) continue;
    spdlog::warn("comm queue '{}': task '{}' (step {}) also failed: {}", queue_name, it->task,
                 it->step, it->exception ? exception_text(it->exception) : it->status.message());
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
