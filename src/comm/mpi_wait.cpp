#include "comm/mpi_wait.h"

#include <algorithm>
#include <thread>

namespace sparq::comm {
namespace {

// Calls test(&done) until it sets done or fails, pausing in between (Note [Waiting for MPI]).
template <typename Test>
int test_with_pauses(Test&& test) {
  std::chrono::microseconds pause = kFirstPause;
  for (;;) {
    int done = 0;
    const int rc = test(&done);
    if (rc != MPI_SUCCESS || done) return rc;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

}  // namespace

int wait_request(MPI_Request* request, MPI_Status* status, MpiWait mode) {
  if (mode == MpiWait::kBusy) return MPI_Wait(request, status);
  return test_with_pauses([&](int* done) { return MPI_Test(request, done, status); });
}

int wait_all_requests(std::span<MPI_Request> requests, MpiWait mode) {
  if (requests.empty()) return MPI_SUCCESS;
  const int n = static_cast<int>(requests.size());
  if (mode == MpiWait::kBusy) return MPI_Waitall(n, requests.data(), MPI_STATUSES_IGNORE);
  return test_with_pauses(
      [&](int* done) { return MPI_Testall(n, requests.data(), done, MPI_STATUSES_IGNORE); });
}

}  // namespace sparq::comm
