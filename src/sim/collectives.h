// Collective costs in the alpha-beta (Hockney) model: a message of m bytes over one link costs
// alpha + m * beta seconds. Every rank has one full-duplex link (it may send one message and
// receive one at the same time); contention inside the network is NOT modelled. Reduction
// arithmetic (gamma in Thakur et al.) is left out: it is part of each compressor's measured
// decode cost, and for dense sums it is far below beta on the networks simulated here.
//
// n: bytes of each rank's input (allreduce) or message; P: ranks. The formulas and sources:
//
//   ring allreduce (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for
//   clusters of workstations"; Thakur, Rabenseifner & Gropp 2005, "Optimization of collective
//   communication operations in MPICH", section 4.1): a reduce-scatter and an allgather, each
//   P-1 steps of one n/P block:            2(P-1) alpha + 2 (P-1)/P n beta
//   recursive-doubling allreduce (Thakur et al. 2005, 4.1): log2 P rounds exchanging the
//   whole vector:                          log2 P (alpha + n beta)
//   Rabenseifner allreduce (Thakur et al. 2005, 4.1: recursive-halving reduce-scatter +
//   recursive-doubling allgather):         2 log2 P alpha + 2 (P-1)/P n beta
//   For both, P not a power of two runs on the largest power of two Q < P, the other P - Q
//   ranks folded in (each sends its whole vector to a partner) and out (the partner sends the
//   result back): the formula at Q plus 2 (alpha + n beta). (MPICH folds Rabenseifner's in
//   by halves, a little cheaper; ceil(log2 P) rounds, which this replaced, was no algorithm
//   and cheaper than either: review.)
//   binomial-tree allreduce (reduce to a root, then broadcast; Thakur et al. 2005, 4.1):
//                                          2 ceil(log2 P) (alpha + n beta)
//   ring allgatherv (Thakur et al. 2005, 3.1; Patarasuk & Yuan for the ring): P-1 steps; in
//   each every rank forwards one block, and the largest block is forwarded in every step:
//                                          (P-1) (alpha + largest block beta)
//   pairwise-exchange alltoallv (Thakur et al. 2005, 3.4): P-1 steps, in step s rank r sends
//   its block for r+s and receives the one from r-s:
//                                          (P-1) alpha + (sum of the blocks it sends) beta
//   recursive-doubling / Bruck allgather (Thakur et al. 2005, 3.1; Bruck et al. 1997 for
//   P not a power of two), P messages of m bytes:
//                                          ceil(log2 P) alpha + (P-1) m beta
//   Bruck alltoall (Thakur et al. 2005, 3.4, short messages), blocks of b bytes:
//                                          ceil(log2 P) alpha + ceil(log2 P) (P b / 2) beta
//   binomial broadcast (Thakur et al. 2005, 3.2, short messages): ceil(log2 P) (alpha + n beta)
//   scatter-allgather broadcast (Thakur et al. 2005, 3.2, long messages; van de Geijn): a
//   binomial scatter of n/P blocks, then an allgather of them:
//                                          ceil(log2 P) alpha + (P-1)/P n beta + allgather(n/P)
//   broadcast (MPI_Bcast, which the MPI library runs by size under every comm.allreduce):
//                                          min(binomial, scatter-allgather)
//   two_phase sparse allreduce (Renggli et al. 2019, SparCML, "split allgather"; Li & Hoefler
//   2022, Ok-Topk): an alltoallv of the P-1 per-region messages to their owners, then an
//   allgatherv of the P region results:    alltoallv(region messages) + allgatherv(results)
//   gtopk tree (Shi et al. 2019, "A distributed synchronous SGD algorithm with global top-k
//   sparsification"; sparq's variant, docs/compress.md "tree"): ceil(log2 P) rounds in which
//   pairs exchange one k-entry message, then rank 0 broadcasts the global index set and the
//   k values are summed by one allreduce of k floats:
//       ceil(log2 P) (alpha + m beta) + broadcast(index set) + allreduce(4k)
//
//   auto allreduce (the MPI backend's comm.allreduce: auto, MpiCommunicator::use_ring): sparq's
//   ring for n >= comm::auto_ring_threshold_bytes(P) (comm/ring_threshold.h), else the MPI
//   library's choice (best):
//                                          n >= threshold ? ring : best
//
// P = 1 costs nothing. All results are seconds. Pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace sparq::sim {

struct Link {
  double alpha_s = 0;          // per-message latency, seconds
  double beta_s_per_byte = 0;  // seconds per byte
};

// ceil(log2 P) for P >= 1.
int ceil_log2(std::int64_t p);

double ring_allreduce_s(double n, int p, const Link& link);
double recursive_doubling_allreduce_s(double n, int p, const Link& link);
double rabenseifner_allreduce_s(double n, int p, const Link& link);
double tree_allreduce_s(double n, int p, const Link& link);
// The cheapest of the four above: what an MPI library that chooses by size approaches.
double best_allreduce_s(double n, int p, const Link& link);
// What the MPI backend runs under comm.allreduce: auto: ring from the threshold, best below.
double auto_allreduce_s(double n, int p, const Link& link);

// Every rank contributes one message; `sizes[r]` its bytes. P-1 ring steps, in each of which
// some rank forwards the largest block: (P-1)(alpha + largest block beta).
double ring_allgatherv_s(const std::vector<double>& sizes, const Link& link);
// P equal messages of m bytes: (P-1)(alpha + m beta).
double ring_allgather_s(double m, int p, const Link& link);
// Each rank sends one block of `block` bytes to each of the P-1 others.
double pairwise_alltoall_s(double block, int p, const Link& link);
double binomial_broadcast_s(double n, int p, const Link& link);
// Binomial scatter of n/P blocks, then an allgather of them with `algorithm` (allgather_s).
double scatter_allgather_broadcast_s(const std::string& algorithm, double n, int p,
                                     const Link& link);
// MPI_Bcast of n bytes: the cheaper of binomial and scatter-allgather, as MPI libraries switch
// to the second for long messages. MPI_Bcast is the library's under every comm.allreduce, so
// every algorithm takes the cheaper; `algorithm` (ring | best | auto) only says how the
// allgather half is priced: ring for "ring", the cheaper of ring and recursive doubling
// otherwise. The binomial tree alone priced an index set of megabytes at ceil(log2 P) whole
// copies (review, 2026-12-07).
double broadcast_s(const std::string& algorithm, double n, int p, const Link& link);
double recursive_doubling_allgather_s(double m, int p, const Link& link);
double bruck_alltoall_s(double block, int p, const Link& link);
// "ring": ring allgather / pairwise alltoall; "best": the cheaper of the two algorithms (what
// an MPI library choosing by message size approaches).
double allgather_s(const std::string& algorithm, double m, int p, const Link& link);
// MPI_Alltoall of fixed-size blocks (two_phase's size exchange). Payloads of per-rank sizes go
// through MPI_Alltoallv, which MPI libraries run pairwise or as P-1 posted messages, never
// by Bruck (Open MPI's tuned alltoallv: linear or pairwise; Bruck is short MPI_Alltoall's):
// they are pairwise_alltoall_s whatever the algorithm (review, 2026-12-06).
double alltoall_s(const std::string& algorithm, double block, int p, const Link& link);
// Region messages of `region_message` bytes each to P-1 owners (an alltoallv: pairwise),
// then P region results of `region_result` bytes each gathered by everyone.
double two_phase_s(double region_message, double region_result, int p, const Link& link,
                   const std::string& algorithm = "ring");
// Algorithm names for the simulator: ring (sparq's own ring allreduce, what its byte model
// counts; ring allgather, pairwise alltoall) or best (the cheapest algorithm above for the
// size: an MPI library choosing by size). `flag` names the option in the error.
Result<std::string> parse_algorithm(const std::string& name, const std::string& flag);
// The allreduce pricing of a config's comm.allreduce, as MpiCommunicator::use_ring runs it:
// ring -> "ring" (always sparq's ring), auto -> "auto" (the ring from the threshold), mpi ->
// "best" (always the library's algorithm).
std::string config_allreduce_algorithm(const std::string& comm_allreduce);
// algorithm: ring | best | auto.
double allreduce_s(const std::string& algorithm, double n, int p, const Link& link);

// Tree rounds exchanging `message` bytes, the broadcast of `index_set` bytes (broadcast_s), the
// allreduce of `k` floats (4k bytes) with `algorithm`.
double gtopk_tree_s(double message, double index_set, double k, int p, const Link& link,
                    const std::string& algorithm = "ring");

}  // namespace sparq::sim
