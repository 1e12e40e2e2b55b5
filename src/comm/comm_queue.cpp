#include "comm/comm_queue.h"

#include "core/check.h"

namespace sparq::comm {

detail::QueuedTask& CommHandle::checked(const char* what) const {
  SPARQ_CHECK(task_ != nullptr, "CommHandle::{}() on an invalid handle", what);
  return *task_;
}

}  // namespace sparq::comm
