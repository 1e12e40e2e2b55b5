// Note [MPI lives until exit] (comm/mpi_communicator.cpp) as an embedder meets it, under mpirun
// in a program that does not initialise MPI itself: two MPI communicators made and destroyed
// one after another both work, and train_main() runs twice in one process. Before 2026-12-06
// the first communicator finalised MPI when destroyed, and the second (or the second
// train_main) failed with "MPI has already been finalised" (review). The program's own
// handlers of the stop signals are its own again after each train_main() (they were left
// replaced: review, 2026-12-07). Exit 0 on success.
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "train/train_main.h"

namespace {

extern "C" void host_handler(int) {}

// Whether SIGINT, SIGTERM and SIGUSR1 are handled by host_handler.
bool host_handles_stop_signals() {
  for (int signal : {SIGINT, SIGTERM, SIGUSR1}) {
    struct sigaction now = {};
    if (sigaction(signal, nullptr, &now) != 0 || now.sa_handler != host_handler) return false;
  }
  return true;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "mpi_lifetime_probe: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int size = 0;
  for (int round = 0; round < 2; ++round) {
    auto made = sparq::comm::make_mpi_communicator(&argc, &argv);
    if (!made.is_ok()) {
      return fail("communicator " + std::to_string(round) + ": " + made.status().message());
    }
    sparq::comm::Communicator& comm = **made;
    size = comm.size();
    float one = 1.0f, sum = 0.0f;
    comm.allreduce(&one, &sum, 1, sparq::DType::kF32, sparq::comm::ReduceOp::kSum);
    if (sum != static_cast<float>(comm.size())) {
      return fail("communicator " + std::to_string(round) + ": allreduce gave " +
                  std::to_string(sum));
    }
  }
  struct sigaction host = {};
  host.sa_handler = host_handler;
  sigemptyset(&host.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGUSR1}) sigaction(signal, &host, nullptr);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> args = {"train", "--config",
                                     std::string(SPARQ_SOURCE_DIR) + "/configs/default.yaml"};
    for (const char* set : {"train.steps=2", "optim.warmup_steps=1", "train.eval_interval=0",
                            "train.eval_batches=1", "log.progress_interval=0"}) {
      args.insert(args.end(), {"--set", set});
    }
    std::vector<char*> argv_run;
    for (std::string& a : args) argv_run.push_back(a.data());
    argv_run.push_back(nullptr);
    const int rc = sparq::train::train_main(static_cast<int>(args.size()), argv_run.data());
    if (rc != 0) return fail("train_main " + std::to_string(round) + " returned " + std::to_string(rc));
    if (!host_handles_stop_signals()) {
      return fail("train_main " + std::to_string(round) +
                  " left its stop-signal handlers installed");
    }
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (finalized) return fail("MPI was finalised before exit");
  std::printf("mpi_lifetime_probe: 2 communicators and 2 train_main runs on %d rank(s)\n", size);
  return 0;  // MPI is finalised at exit
}
