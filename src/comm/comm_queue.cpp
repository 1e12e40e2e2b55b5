#include "comm/comm_queue.h"

#include "core/check.h"
#include "core/timer.h"

namespace sparq::comm {

detail::QueuedTask& CommHandle::checked(const char* what) const {
  SPARQ_CHECK(task_ != nullptr, "CommHandle::{}() on an invalid handle", what);
  return *task_;
}

bool CommQueue::gate(const CommHandle&, void*) { return false; }

CommQueue::Mark CommQueue::mark_producer() {
  const std::int64_t now = now_us();
  return [now] { return now; };
}

}  // namespace sparq::comm
