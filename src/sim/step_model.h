// The step timeline of one data-parallel micro-batch step of P identical workers
// (docs/simulate.md, "The step"). Every worker runs the same timeline, so one is simulated:
//
//   0 ............ forward ............ F ..... backward, layer by layer in reverse ..... B
//   layer i's gradients are final at ready_i = F + (sum of the backward intervals of the
//   layers after it, and its own); a bucket is ready when all its tensors are, i.e. at the
//   ready time of its lowest-indexed layer.
//   ONE comm thread takes the ready buckets in readiness order (Note [Readiness launch
//   order], comm/wfbp_scheduler.h; ties by bucket index): start = max(ready, previous end),
//   end = start + cost(bucket). With comm.overlap = false every bucket is ready at B, and they
//   launch in the same readiness order (the order their gradients completed in).
//   Then the optimizer: step = max(B, last end) + optimizer.
//   With per-step control collectives (Note [Per-step control]) the step starts with them,
//   blocking: forward begins at C, their time, and every time above moves by C.
//
// Note [Communication under compute]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Moving bytes costs CPU too (the MPI progress thread, the kernel's TCP and, on the emulated
// cluster, its bridge and shapers), and while backward keeps every core busy that work waits
// for a core. StepOptions::busy_comm_rate is the rate at which a bucket's cost is worked off
// before B, relative to after it (1: no slowdown, the default; a bucket of cost c started at
// s < B ends at s + c / rate if that is before B, else at B + c - (B - s) * rate). It is a
// measured property of a machine and a world size, not of the network alone: on the 2-core
// emulated cluster N ranks share the cores, and scripts/measure_busy_comm_rate.sh (bench_comm's
// allreduce, idle and with one busy process per rank) measures it (docs/simulate.md,
// "Communication under compute").
//
// A bucket's cost (seconds; encode/decode from the compressor's codec rates, GB/s of f32):
//   dense bucket           allreduce of its f32 array (plan-dense buckets in every cell: no
//                          compressor is built for them)
//   allreduce (bf16)       encode(n) + allreduce(message) + decode(n)
//   powersgd               encode(n) + allreduce(P factors + dense) + allreduce(Q factors)
//                          + decode(n)
//   allgather              encode(n) + allgatherv(P messages) + P decode(n)
//   two_phase              encode(n) + alltoallv(region messages) + P decode(n/P)
//                          + encode(n/P) + allgatherv(region results) + P decode(n/P)
//   tree (gtopk)           encode(n) + gtopk_tree(...) + ceil(log2 P) decode(n) + fill(n)
//                          [+ ceil(log2 P) (fill(n) + decode(n) + encode(n)): lists merged
//                          by encode]
//   tied rows              allgather(8) + allgatherv(4 rows) + allgatherv(4 rows dim): counts,
//                          row ids, values (comm/sparse_rows.h); the adds are not costed
// with encode(m) = 4m / encode_gbps and decode(m) = 4m / decode_gbps, fill(m) = 4m / fill_gbps,
// n = the bucket's floats, plus the bucket's control messages (Note [Control messages]).
// The tree never decodes its result: it zero-fills the bucket and writes the k agreed values
// (gtopk_aggregator.cpp), and a merge by encode zero-fills its dense sum first each round;
// the tree priced one more decode(n) instead and no fill (review, 2026-12-07).
// Collective costs: sim/collectives.h, with the algorithms StepOptions names. Bytes sent per
// rank: comm/byte_model.h's ring model (rank 0) for allreduce and allgather, its alltoallv
// model for two_phase, and for the tree rank 0's too, the root (it receives every round's
// message and sends none, and starts the index set's chain broadcast; the other ranks send
// more); control messages included, as the communicator counts every message.
//
// Note [Control messages]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Besides their payload, the CPU strategies send small messages a receiver needs first, each
// one more latency on the comm thread (8 bytes: one int64):
//   allgather      an allgather of the message sizes when the compressor has no fixed size
//                  (comm::allgather_bytes; SimBucket::sizes_exchanged);
//   two_phase      an alltoall of the region message sizes before phase 1, and an allgather
//                  of the region results' sizes before phase 2 (dense results too);
//   tree (gtopk)   rank 0's k broadcast first, a size header before each round's message, and
//                  the index set's count broadcast before the indices (gtopk_aggregator.cpp);
//   every step     the last of the plan's buckets ends with GradientExchange's agreement on
//                  non-finite buckets, an allreduce of one int32 (gradient_exchange.cpp).
// They are latency-dominated, so they matter most at small buckets and large P. The GPU path
// sends fixed-capacity messages without them (compress/device_*.cpp); the simulator prices the
// CPU path.
//
// Note [Per-step control]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Two allreduces of every step sit outside the buckets, before the forward, and block it; the
// trainer adds them to the step's exposed communication and to its bytes as the communicator
// counted them (add_exposed_control: the ring model's bytes, rank 0's in the simulator, about
// 2(P-1)/P of a large payload, one int64 for the single-element count). Payloads:
//   stop poll      Trainer::run's agreement on stop signals, 64 int32 = 256 bytes, every step
//                  when the run polls (Trainer::Options::stop_requested; the train app always
//                  sets it) and P > 1 (stop_poll.cpp, agree_on_stop_signal);
//   target count   models that weigh counted targets (Model::weighs_counted_targets: BERT's
//                  MLM) sum the step's counted targets, one int64 = 8 bytes
//                  (data_parallel.cpp, weigh_micro_batches).
// Each is allreduce_s of StepOptions::allreduce. Left out of the model until 2026-12-07
// (review), which put a latency-bound collective or two a step outside every prediction.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/collectives.h"
#include "sim/profile.h"

namespace sparq::sim {

enum class CommKind {
  kDenseAllreduce, kAllreduce, kPowerSgd, kAllgather, kTwoPhase, kTree,
  kTiedRows,  // the split tied embedding's lookup rows (comm/sparse_rows.h), after backward
};

struct SimBucket {
  int index = 0;
  int ready_layer = 0;  // Model::layers() index whose readiness completes the bucket
  std::int64_t numel = 0;
  CommKind kind = CommKind::kDenseAllreduce;
  double wire_elem_bytes = 4;  // kDenseAllreduce / kAllreduce: bytes per summed element
  double p_bytes = 0, q_bytes = 0;  // kPowerSgd: the two allreduced arrays
  // Sparse kinds: bytes of one message for a span of that many floats, and its kept entries.
  std::function<double(std::int64_t)> message_bytes;
  std::function<double(std::int64_t)> kept;
  CodecRate codec;  // encode/decode rates (unused by dense buckets)
  // The decode's work against the profile's measurement of it: a sparse decode touches the
  // kept entries, so at density rho it is rho / rho_measured of the rate's time, where
  // rho_measured is the compressor's default density, at which sim_profile times it
  // (measure.cpp). 1 for compressors without a density.
  double decode_scale = 1;
  // Sparse formats: the first decode into a bucket (or region) is a kSet, which zero-fills all
  // its floats before writing the kept ones, a pass the sparse decode rate does not hold. At
  // this rate (GB/s of f32 written); 0 leaves it unpriced (dense formats write every value in
  // the decode itself).
  double fill_gbps = 0;
  // kTwoPhase: the region results are re-compressed (compress.server_compression), else
  // allgathered as dense f32.
  bool server_compression = true;
  // kAllgather: the messages have no fixed size, so their sizes are allgathered first (Note
  // [Control messages]).
  bool sizes_exchanged = false;
  // kTree: lists merge by encode (CompressorCapabilities::merges_by_encode, lbs): a merge
  // decodes both lists into a dense sum and encodes it again, where sparse f32 lists merge
  // as pairs at no codec cost.
  bool merges_by_encode = false;
  std::int64_t rows = 0, dim = 0;  // kTiedRows: rows sent per rank, floats per row
};

struct StepInput {
  double forward_s = 0;
  std::vector<double> backward_s;  // per layer, layers() order: the interval ending at its readiness
  double optimizer_s = 0;
  std::vector<SimBucket> buckets;
  // Note [Per-step control]; train_step_input() (sim/workload.h) sets them as train runs.
  bool polls_stop_signals = false;
  bool counts_targets = false;
};

// Note [Per-step control]: the payload of each allreduce (priced as the ring's bytes on rank 0).
inline constexpr double kStopPollBytes = 256;   // 64 int32 slots
inline constexpr double kTargetCountBytes = 8;  // one int64

struct StepOptions {
  int world_size = 1;
  Link link;
  std::string allreduce = "ring";  // collectives.h: ring | best | auto
  std::string gather = "ring";     // allgather and alltoall: ring (pairwise) | best
  bool overlap = true;
  // Communication's rate while backward computes, relative to after it, in (0, 1]
  // (Note [Communication under compute]).
  double busy_comm_rate = 1.0;
};

struct BucketTiming {
  int index = 0;
  double ready_ms = 0, start_ms = 0, end_ms = 0;
  double bytes_sent = 0;
};

struct StepResult {
  double step_ms = 0, forward_ms = 0, backward_ms = 0;  // backward_ms: its duration
  double comm_end_ms = 0;        // from the step's start; backward's end when nothing is sent
  double exposed_comm_ms = 0;    // max(0, comm end - backward end) + control_ms
  double control_ms = 0;         // Note [Per-step control]: before the forward, blocking
  double bytes_sent = 0;         // per rank, all buckets
  std::vector<BucketTiming> buckets;  // in launch order
};

// Note [Per-step control]: their seconds and bytes on one rank (0 at P = 1).
double step_control_s(const StepInput& input, const StepOptions& options);
double step_control_bytes(const StepInput& input, int world_size);

// One bucket's cost in seconds and the bytes one rank sends for it.
double bucket_cost_s(const SimBucket& bucket, const StepOptions& options);
double bucket_bytes_sent(const SimBucket& bucket, int world_size);

StepResult simulate_step(const StepInput& input, const StepOptions& options);
// The step of ONE worker, which communicates nothing: forward + backward + optimizer.
double single_worker_step_ms(const StepInput& input);

}  // namespace sparq::sim
