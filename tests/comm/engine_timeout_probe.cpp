// A small MPI program that engine_timeout_test.cpp launches under mpirun. It initialises MPI
// itself through make_mpi_communicator (the path applications take).
//   engine_timeout_probe ok        every rank joins an allreduce; prints the sum; exits 0
//   engine_timeout_probe withhold  the last rank never joins; the others' CommEngine wait
//                                  times out after 1 s, with the collective running, and
//                                  must end the whole job
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <thread>

#include "comm/comm_engine.h"
#include "comm/mpi_communicator.h"

int main(int argc, char** argv) {
  using namespace sparq::comm;
  const bool withhold = argc > 1 && std::strcmp(argv[1], "withhold") == 0;
  auto made = make_mpi_communicator(&argc, &argv);
  if (!made.is_ok()) {
    std::fprintf(stderr, "%s\n", made.status().message().c_str());
    return 2;
  }
  std::unique_ptr<Communicator> comm = std::move(made).value();
  int sum = 0;
  {
    // withhold: the timeout is what is tested. ok: it only guards against a hang (below the
    // test's outer 60 s); a tight one would race with how late the peers reach the collective.
    CommEngine engine(*comm, {.timeout_s = withhold ? 1.0 : 30.0, .name = "probe"});
    int mine = comm->rank() + 1;
    if (withhold && comm->rank() == comm->size() - 1) {
      // Stays away from MPI (joining another collective on the same communicator would be an
      // erroneous program) until the other ranks' timeout aborts the job and mpirun kills it.
      // It waits for that kill, not for a guess at how long the abort takes: a job the abort
      // does not end runs into the test's outer timeout, which the test tells apart.
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    std::promise<void> running;
    CommHandle h = engine.submit("withheld allreduce", 7, [&](Communicator& c) {
      running.set_value();
      c.allreduce(&mine, &sum, 1, sparq::DType::kI32, ReduceOp::kSum);
    });
    // The timed wait starts once the engine thread is in the collective, so the timeout can
    // only find it running there, never still queued.
    running.get_future().wait();
    if (!engine.wait(h).is_ok()) return 4;
  }
  if (comm->rank() == 0) std::printf("probe ok: sum %d\n", sum);
  return sum == comm->size() * (comm->size() + 1) / 2 ? 0 : 5;
}
