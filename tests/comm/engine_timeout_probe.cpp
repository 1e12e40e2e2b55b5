// A small MPI program that engine_timeout_test.cpp launches under mpirun. It initialises MPI
// itself through make_mpi_communicator (the path applications take).
//   engine_timeout_probe ok        every rank joins an allreduce; prints the sum; exits 0
//   engine_timeout_probe withhold  the last rank never joins; the others' CommEngine wait
//                                  times out after 1 s and must end the whole job
#include <chrono>
#include <cstdio>
#include <cstring>
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
    CommEngine engine(*comm, {.timeout_s = 1.0, .name = "probe"});
    int mine = comm->rank() + 1;
    if (withhold && comm->rank() == comm->size() - 1) {
      // Stays away from MPI (joining another collective on the same communicator would be an
      // erroneous program) until the other ranks' timeout aborts the job and mpirun kills it.
      std::this_thread::sleep_for(std::chrono::seconds(30));
      std::fprintf(stderr, "withholding rank outlived the timeout: the abort did not happen\n");
      return 3;
    }
    CommHandle h = engine.submit("withheld allreduce", 7, [&](Communicator& c) {
      c.allreduce(&mine, &sum, 1, sparq::DType::kI32, ReduceOp::kSum);
    });
    if (!engine.wait(h).is_ok()) return 4;
  }
  if (comm->rank() == 0) std::printf("probe ok: sum %d\n", sum);
  return sum == comm->size() * (comm->size() + 1) / 2 ? 0 : 5;
}
