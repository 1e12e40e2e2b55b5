// bench_comm: time, algorithm bandwidth and bus bandwidth (nccl-tests convention) of
// allreduce, allgather, reduce_scatter and alltoall from 4 KiB up to max_mib (default 256),
// each measured through the sparq path (CommEngine task -> MpiCommunicator) and, in the same
// run and on the same buffers, through the MPI library directly. The ratio column is
// engine time / direct time: the overhead of the engine path (both run MPI's own allreduce),
// so 1 means none and below 1 is noise. Nothing is asserted.
//
//   mpirun -np 2 bench_comm [max_mib] [--min-mib M] [--ops allreduce,allgather,...] [--iters K]
//                           [--rounds R]
//
// --min-mib starts the size sweep at M MiB instead of 4 KiB, --ops runs only the named ops (in
// the order given) and --iters fixes the timed calls per size and round (default: 256 MiB
// worth, 3 to 200): on a slow link one large allreduce a few times is a minute where the whole
// sweep would be an hour (scripts/measure_busy_comm_rate.sh uses them).
//
// Each size runs R rounds (default 5) of the two paths in turn, the direct path first in odd
// rounds; a round times K calls of a path. The table gives each path's median round and the
// ratio of the medians, then each path's fastest-slowest round and the range of the ratios of
// the rounds (each against the other path's round next to it in time). Until 2026-12-06 each
// path ran once, the engine first, and noise gave ratios such as 0.18 at 1 MiB (review).
//
// Size is the nccl-tests "size": the full buffer (allreduce: the vector; allgather: the
// gathered output; reduce_scatter: the input; alltoall: the send buffer). algbw = size / time;
// busbw = algbw * 2(P-1)/P for allreduce and * (P-1)/P for the others. A round's time is the
// slowest rank's mean per call over its K calls.
//
//   mpirun -np 2 bench_comm --allreduce-algorithms [max_mib=64] [gbit_per_s=0]
//
// times allreduce through two MpiCommunicators side by side on the same buffers, one with
// comm.allreduce: mpi (MPI_Allreduce) and one with ring (sparq's ring, comm/mpi_ring.h), from
// 4 KiB to max_mib in steps of 2x, and prints which is faster: the figures behind the `auto`
// crossover in mpi_communicator.cpp. Each size runs 5 interleaved rounds of each and keeps
// the best round (the machine may be shared). gbit_per_s > 0 wraps both in the emulated link
// (comm/emulated_link.h); it sleeps by the byte model, the same for both algorithms, so it
// adds the same time to each and cannot tell them apart.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_args.h"
#include "comm/comm_engine.h"
#include "comm/emulated_link.h"
#include "comm/mpi_communicator.h"

namespace {

using sparq::DType;
using namespace sparq::comm;

enum class Op { kAllreduce, kAllgather, kReduceScatter, kAlltoall };
const char* op_name(Op op) {
  switch (op) {
    case Op::kAllreduce:
      return "allreduce";
    case Op::kAllgather:
      return "allgather";
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kAlltoall:
      return "alltoall";
  }
  return "?";
}

double bus_factor(Op op, int p) {
  return op == Op::kAllreduce ? 2.0 * (p - 1) / p : static_cast<double>(p - 1) / p;
}

// Mean seconds per call over `iters` calls, the slowest rank's; one untimed call first when
// `warm_up`.
double time_loop(int iters, const std::function<void()>& body, bool warm_up = true) {
  if (warm_up) body();  // connection setup and first-touch of the buffers
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) body();
  double local = (MPI_Wtime() - start) / iters, slowest = 0.0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

std::unique_ptr<Communicator> make_or_exit(int* argc, char*** argv, AllreduceAlgorithm algo,
                                           double gbit_per_s) {
  auto made = make_mpi_communicator(argc, argv, {.allreduce = algo});
  if (!made.is_ok()) {
    std::fprintf(stderr, "bench_comm: %s\n", made.status().message().c_str());
    std::exit(1);
  }
  std::unique_ptr<Communicator> comm = std::move(made).value();
  if (gbit_per_s > 0) comm = make_emulated_link(std::move(comm), {.gbit_per_s = gbit_per_s});
  return comm;
}

// The --allreduce-algorithms mode (see the top of the file).
int compare_allreduce_algorithms(int argc, char** argv) {
  if (argc > 4) {
    std::fprintf(stderr,
                 "bench_comm: --allreduce-algorithms takes [max_mib] [gbit_per_s], got "
                 "'%s' more\n",
                 argv[4]);
    return 2;
  }
  std::size_t max_bytes = std::size_t{64} << 20;
  double gbit = 0.0;
  if (argc > 2) {
    const auto mib = sparq::bench::whole_arg(argv[2], 1);
    if (!mib || *mib > 8191) {  // as kMaxMib below
      return sparq::bench::refuse_arg("bench_comm", "max_mib", argv[2], "1 to 8191 MiB");
    }
    max_bytes = static_cast<std::size_t>(*mib) << 20;
  }
  if (argc > 3 && std::string_view(argv[3]) != "0") {
    const auto rate = sparq::bench::positive_arg(argv[3]);
    if (!rate)
      return sparq::bench::refuse_arg("bench_comm", "gbit_per_s", argv[3], "0 or a rate > 0");
    gbit = *rate;
  }
  // The first communicator initialises (and at exit finalises) MPI: declared first, destroyed
  // last.
  auto mpi = make_or_exit(&argc, &argv, AllreduceAlgorithm::kMpi, gbit);
  auto ring = make_or_exit(nullptr, nullptr, AllreduceAlgorithm::kRing, gbit);
  const int p = mpi->size(), rank = mpi->rank();
  if (rank == 0) {
    const std::string link = gbit > 0 ? std::to_string(gbit) + " Gbit/s" : "off";
    std::printf("bench_comm --allreduce-algorithms: %d ranks, f32 sum, in place, ", p);
    std::printf("emulated link %s\n", link.c_str());
    std::printf("%10s | %11s %9s | %11s %9s | %10s %s\n", "size", "mpi us", "busbw", "ring us",
                "busbw", "ring/mpi", "faster");
  }
  for (std::size_t bytes = 4096; bytes <= max_bytes; bytes *= 2) {
    const std::size_t n = bytes / 4;
    std::vector<float> buffer(n, 1.0f);
    const int iters = static_cast<int>(std::clamp<std::size_t>((64u << 20) / bytes, 4, 200));
    double best_mpi = 1e30, best_ring = 1e30;
    for (int round = 0; round < 5; ++round) {
      // In turn, the first of the pair alternating by round (the MPI algorithm always ran
      // first; review, 2026-12-07); the same order on every rank, as the collectives need.
      const std::array<Communicator*, 2> order =
          round % 2 == 0 ? std::array<Communicator*, 2>{mpi.get(), ring.get()}
                         : std::array<Communicator*, 2>{ring.get(), mpi.get()};
      for (Communicator* c : order) {
        const double s = time_loop(iters, [&] {
          c->allreduce(buffer.data(), buffer.data(), n, DType::kF32, ReduceOp::kSum);
        });
        double& best = c == mpi.get() ? best_mpi : best_ring;
        best = std::min(best, s);
      }
    }
    if (rank == 0) {
      const double bus = static_cast<double>(bytes) * bus_factor(Op::kAllreduce, p) * 1e-9;
      std::printf("%10zu | %11.1f %9.3f | %11.1f %9.3f | %10.3f %s\n", bytes, best_mpi * 1e6,
                  bus / best_mpi, best_ring * 1e6, bus / best_ring, best_ring / best_mpi,
                  best_ring < best_mpi ? "ring" : "mpi");
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--allreduce-algorithms") {
    return compare_allreduce_algorithms(argc, argv);
  }
  auto made = make_mpi_communicator(&argc, &argv);
  if (!made.is_ok()) {
    std::fprintf(stderr, "bench_comm: %s\n", made.status().message().c_str());
    return 1;
  }
  std::unique_ptr<Communicator> comm = std::move(made).value();
  // The engine path runs MPI's own allreduce, as the direct column does: with the default
  // (auto) large buffers took sparq's ring, and the ratio mixed the algorithm with the engine's
  // overhead (0.54 at 16 MiB on 2 ranks: review, 2026-12-06). --allreduce-algorithms compares
  // the algorithms.
  comm->settle_options({.allreduce = "mpi"});
  std::size_t max_bytes = std::size_t{256} << 20, min_bytes = 4096;
  int fixed_iters = 0;  // 0: by size
  int rounds = 5;
  std::string ops = "allreduce,allgather,reduce_scatter,alltoall";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // MPI takes an int count of floats: 8191 MiB is the largest whole MiB size it holds (up
    // to 1 TiB was accepted, and the count wrapped past 8 GiB; review, 2026-12-07).
    constexpr long long kMaxMib = 8191, kMaxCount = 1000000;
    if (arg == "--min-mib" && i + 1 < argc) {
      const auto mib = sparq::bench::whole_arg(argv[++i], 1);
      if (!mib || *mib > kMaxMib)
        return sparq::bench::refuse_arg("bench_comm", arg, argv[i], "1 to 8191");
      min_bytes = static_cast<std::size_t>(*mib) << 20;
    } else if (arg == "--iters" && i + 1 < argc) {
      const auto n = sparq::bench::whole_arg(argv[++i], 1);
      if (!n || *n > kMaxCount)
        return sparq::bench::refuse_arg("bench_comm", arg, argv[i], "1 to 1000000");
      fixed_iters = static_cast<int>(*n);
    } else if (arg == "--rounds" && i + 1 < argc) {
      const auto n = sparq::bench::whole_arg(argv[++i], 1);
      if (!n || *n > kMaxCount)
        return sparq::bench::refuse_arg("bench_comm", arg, argv[i], "1 to 1000000");
      rounds = static_cast<int>(*n);
    } else if (arg == "--ops" && i + 1 < argc) {
      ops = argv[++i];
    } else if (!arg.empty() && arg[0] != '-') {
      const auto mib = sparq::bench::whole_arg(arg, 1);
      if (!mib || *mib > kMaxMib)
        return sparq::bench::refuse_arg("bench_comm", "max_mib", arg, "1 to 8191");
      max_bytes = static_cast<std::size_t>(*mib) << 20;
    } else {
      std::fprintf(stderr,
                   "bench_comm: unknown argument '%s' (usage at the top of "
                   "bench/bench_comm.cpp)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (max_bytes == 0 || min_bytes == 0 || min_bytes > max_bytes) {
    std::fprintf(stderr,
                 "bench_comm: sizes: max_mib must be a positive integer and --min-mib "
                 "at least 1 and at most max_mib (got max_mib %zu, sweep start %zu KiB)\n",
                 max_bytes >> 20, min_bytes >> 10);
    return 2;
  }
  constexpr Op kOps[] = {Op::kAllreduce, Op::kAllgather, Op::kReduceScatter, Op::kAlltoall};
  std::vector<Op> selected;
  for (std::size_t begin = 0; begin <= ops.size();) {
    const std::size_t end = std::min(ops.find(',', begin), ops.size());
    const std::string name = ops.substr(begin, end - begin);
    const Op* found = std::find_if(std::begin(kOps), std::end(kOps),
                                   [&name](Op op) { return name == op_name(op); });
    if (found == std::end(kOps)) {
      std::fprintf(stderr,
                   "bench_comm: --ops: unknown op '%s' (allreduce, allgather, "
                   "reduce_scatter, alltoall)\n",
                   name.c_str());
      return 2;
    }
    if (std::find(selected.begin(), selected.end(), *found) == selected.end()) {
      selected.push_back(*found);
    }
    begin = end + 1;
  }
  const int p = comm->size(), rank = comm->rank();
  CommEngine engine(*comm, {.timeout_s = 600, .name = "bench"});

  if (rank == 0) {
    std::printf(
        "bench_comm: %d ranks, f32, sparq = CommEngine task -> MpiCommunicator, "
        "mpi = direct MPI call; %d rounds of the two in turn per size, us = the median "
        "round's mean per call; ratio = sparq / mpi of the medians (engine overhead, "
        "1 = none); then each path's fastest-slowest round and the min-max of the "
        "rounds' ratios\n",
        p, rounds);
    std::printf("%-15s %10s | %11s %9s %9s | %11s %9s %9s | %6s | %21s | %21s | %13s\n", "op",
                "size", "sparq us", "algbw", "busbw", "mpi us", "algbw", "busbw", "ratio",
                "sparq us min-max", "mpi us min-max", "ratio min-max");
    std::printf("%-15s %10s | %11s %9s %9s | %11s %9s %9s | %6s | %21s | %21s | %13s\n", "",
                "(bytes)", "", "GB/s", "GB/s", "", "GB/s", "GB/s", "", "", "", "");
  }
  for (Op op : selected) {
    // x4 steps, and max_bytes itself when the steps pass it (review: a max of 2 MiB stopped
    // at 1 MiB).
    for (std::size_t bytes = min_bytes; bytes <= max_bytes;
         bytes = bytes < max_bytes && bytes * 4 > max_bytes ? max_bytes : bytes * 4) {
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
      const int iters =
          fixed_iters > 0 ? fixed_iters
                          : static_cast<int>(std::clamp<std::size_t>((256u << 20) / bytes, 3, 200));
      const std::function<void()> engine_call = [&] {
        if (!engine
                 .run(op_name(op), 0,
                      [&](Communicator& c) {
                        sparq_call(c);
                        return sparq::Status::ok();
                      })
                 .is_ok()) {
          std::abort();
        }
      };
      std::vector<double> sparq_rounds, mpi_rounds, ratios;
      for (int round = 0; round < rounds; ++round) {
        const bool first = round == 0, mpi_first = round % 2 == 1;  // warm-up in round 0 only
        if (mpi_first) mpi_rounds.push_back(time_loop(iters, mpi_call, first));
        sparq_rounds.push_back(time_loop(iters, engine_call, first));
        if (!mpi_first) mpi_rounds.push_back(time_loop(iters, mpi_call, first));
        ratios.push_back(sparq_rounds.back() / mpi_rounds.back());
      }
      const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        const std::size_t k = v.size();
        return k % 2 == 1 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
      };
      const auto range = [](const std::vector<double>& v, double scale, int precision) {
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
        char text[64];
        std::snprintf(text, sizeof(text), "%.*f-%.*f", precision, *lo * scale, precision,
                      *hi * scale);
        return std::string(text);
      };
      const double sparq_s = median(sparq_rounds), mpi_s = median(mpi_rounds);
      if (rank == 0) {
        // The bytes the op moved: the allreduce's whole vector, the others' P blocks.
        const std::size_t moved = op == Op::kAllreduce ? n * 4 : block * p * 4;
        const double sz = static_cast<double>(moved);
        const double alg_sparq = sz / sparq_s * 1e-9, alg_mpi = sz / mpi_s * 1e-9;
        std::printf(
            "%-15s %10zu | %11.1f %9.3f %9.3f | %11.1f %9.3f %9.3f | %6.3f | %21s | "
            "%21s | %13s\n",
            op_name(op), moved, sparq_s * 1e6, alg_sparq, alg_sparq * bus_factor(op, p),
            mpi_s * 1e6, alg_mpi, alg_mpi * bus_factor(op, p), sparq_s / mpi_s,
            range(sparq_rounds, 1e6, 1).c_str(), range(mpi_rounds, 1e6, 1).c_str(),
            range(ratios, 1.0, 3).c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
