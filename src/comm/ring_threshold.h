// comm.allreduce: auto's choice between sparq's ring allreduce (mpi_ring.h) and the MPI
// library's own: a pure function of the message size and the world size, with no MPI in it,
// so the simulator (sim/collectives.h) prices exactly what the MPI backend runs.
#pragma once

#include <cstddef>

namespace sparq::comm {

// comm.allreduce: auto runs the ring for messages of at least this many bytes in a world of
// `size` ranks, MPI_Allreduce below (the measured crossover below; docs/comm.md).
inline std::size_t auto_ring_threshold_bytes(int size) {
  // Measured with `bench_comm --allreduce-algorithms 64` (f32, in place, best of 5 rounds)
  // on the development machine: 2 cores, Open MPI 4.1 over shared memory, shared with another
  // engineer's builds (load 1.2-2.5), so 3 and 4 ranks oversubscribe the cores. Ring time /
  // MPI_Allreduce time, range over 2-3 runs (docs/comm.md has the same table):
  //   size            P=2        P=3        P=4
  //   4-8 KiB         1.1-1.6    0.70-1.04  0.79-1.23
  //   16-128 KiB      0.98-1.06  0.79-1.26  0.81-1.46
  //   256 KiB-2 MiB   0.95-1.09  0.39-0.87  0.78-1.26
  //   4 MiB           1.05-1.07  0.67-0.75  0.76-0.99
  //   8-16 MiB        0.80-0.91  0.60-0.72  0.83-1.05
  //   32-64 MiB       0.50-0.70  0.32-0.49  0.50-0.62
  // Each threshold is the smallest size from which the ring was never clearly slower. More
  // ranks than 4 were not measured: they take P=4's value (the ring's 2(P-1) latencies grow
  // with P, so a real cluster may want it higher; comm.allreduce: mpi | ring overrides).
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  if (size <= 2) return 8 * kMiB;
  if (size == 3) return kMiB / 4;
  return 4 * kMiB;
}

}  // namespace sparq::comm
