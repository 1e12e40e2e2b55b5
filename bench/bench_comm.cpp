// bench_comm: time, algorithm bandwidth and bus bandwidth (nccl-tests convention) of
// allreduce, allgather, reduce_scatter and alltoall from 4 KiB up to max_mib (default 256),
// each measured through the sparq path (CommEngine task -> MpiCommunicator) and, in the same
// run and on the same buffers, through the MPI library directly. The ratio column is
// engine time / direct time: the overhead of the engine path. Nothing is asserted.
//
//   mpirun -np 2 bench_comm [max_mib]
//
// Size is the nccl-tests "size": the full buffer (allreduce: the vector; allgather: the
// gathered output; reduce_scatter: the input; alltoall: the send buffer). algbw = size / time;
// busbw = algbw * 2(P-1)/P for allreduce and * (P-1)/P for the others. Times are the slowest
// rank's mean per iteration.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "comm/comm_engine.h"
#include "comm/mpi_communicator.h"

namespace {

using sparq::DType;
using namespace sparq::comm;

enum class Op { kAllreduce, kAllgather, kReduceScatter, kAlltoall };
const char* op_name(Op op) {
  switch (op) {
    case Op::kAllreduce: return "allreduce";
    case Op::kAllgather: return "allgather";
    case Op::kReduceScatter: return "reduce_scatter";
    case Op::kAlltoall: return "alltoall";
  }
  return "?";
}

double bus_factor(Op op, int p) {
  return op == Op::kAllreduce ? 2.0 * (p - 1) / p : static_cast<double>(p - 1) / p;
}

// Mean seconds per call over `iters` calls, the slowest rank's.
double time_loop(int iters, const std::function<void()>& body) {
  body();  // warm-up: connection setup and first-touch of the buffers
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) body();
  double local = (MPI_Wtime() - start) / iters, slowest = 0.0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  auto made = make_mpi_communicator(&argc, &argv);
  if (!made.is_ok()) {
    std::fprintf(stderr, "bench_comm: %s\n", made.status().message().c_str());
    return 1;
  }
  std::unique_ptr<Communicator> comm = std::move(made).value();
  const std::size_t max_bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  const int p = comm->size(), rank = comm->rank();
  CommEngine engine(*comm, {.timeout_s = 600, .name = "bench"});

  if (rank == 0) {
    std::printf("bench_comm: %d ranks, f32, sparq = CommEngine task -> MpiCommunicator, "
                "mpi = direct MPI call\n", p);
    std::printf("%-15s %10s | %11s %9s %9s | %11s %9s %9s | %6s\n", "op", "size", "sparq us",
                "algbw", "busbw", "mpi us", "algbw", "busbw", "ratio");
    std::printf("%-15s %10s | %11s %9s %9s | %11s %9s %9s | %6s\n", "", "(bytes)", "", "GB/s",
                "GB/s", "", "GB/s", "GB/s", "");
  }
  for (Op op : {Op::kAllreduce, Op::kAllgather, Op::kReduceScatter, Op::kAlltoall}) {
    for (std::size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const std::size_t n = bytes / 4;  // elements in the full buffer
      const std::size_t block = n / p;  // per-rank block for gather/scatter/alltoall
      std::vector<float> in(n, 1.0f), out(n, 0.0f);
      const std::vector<std::size_t> counts(p, block);
      std::function<void(Communicator&)> sparq_call;
      std::function<void()> mpi_call;
      switch (op) {
        case Op::kAllreduce:
          sparq_call = [&](Communicator& c) {
            c.allreduce(in.data(), out.data(), n, DType::kF32, ReduceOp::kSum);
          };
          mpi_call = [&] {
            MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
          };
          break;
        case Op::kAllgather:
          sparq_call = [&](Communicator& c) {
            c.allgather(in.data(), out.data(), block, DType::kF32);
          };
          mpi_call = [&] {
            MPI_Allgather(in.data(), static_cast<int>(block), MPI_FLOAT, out.data(),
                          static_cast<int>(block), MPI_FLOAT, MPI_COMM_WORLD);
          };
          break;
        case Op::kReduceScatter:
          sparq_call = [&](Communicator& c) {
            c.reduce_scatter(in.data(), out.data(), counts, DType::kF32, ReduceOp::kSum);
          };
          mpi_call = [&] {
            MPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(block), MPI_FLOAT,
                                     MPI_SUM, MPI_COMM_WORLD);
          };
          break;
        case Op::kAlltoall:
          sparq_call = [&](Communicator& c) {
            c.alltoall(in.data(), out.data(), block, DType::kF32);
          };
          mpi_call = [&] {
            MPI_Alltoall(in.data(), static_cast<int>(block), MPI_FLOAT, out.data(),
                         static_cast<int>(block), MPI_FLOAT, MPI_COMM_WORLD);
          };
          break;
      }
      // Enough iterations for a stable mean at small sizes, few at large ones.
      const int iters = static_cast<int>(std::clamp<std::size_t>((256u << 20) / bytes, 3, 200));
      const double sparq_s = time_loop(iters, [&] {
        if (!engine.run(op_name(op), 0, [&](Communicator& c) {
              sparq_call(c);
              return sparq::Status::ok();
            }).is_ok()) {
          std::abort();
        }
      });
      const double mpi_s = time_loop(iters, mpi_call);
      if (rank == 0) {
        const double sz = static_cast<double>(block * p * 4);
        const double alg_sparq = sz / sparq_s * 1e-9, alg_mpi = sz / mpi_s * 1e-9;
        std::printf("%-15s %10zu | %11.1f %9.3f %9.3f | %11.1f %9.3f %9.3f | %6.3f\n",
                    op_name(op), block * p * 4, sparq_s * 1e6, alg_sparq,
                    alg_sparq * bus_factor(op, p), mpi_s * 1e6, alg_mpi,
                    alg_mpi * bus_factor(op, p), sparq_s / mpi_s);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
