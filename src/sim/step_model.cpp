// The step timeline (step_model.h): readiness from the per-layer backward intervals, one comm
// thread in readiness order, then the optimizer.
#include "sim/step_model.h"

#include <algorithm>
#include <numeric>

#include "comm/byte_model.h"
#include "core/check.h"

namespace sparq::sim {
namespace {

double encode_s(const SimBucket& b, double floats) {
  return b.codec.encode_gbps > 0 ? 4.0 * floats / (b.codec.encode_gbps * 1e9) : 0.0;
}
double decode_s(const SimBucket& b, double floats) {
  return b.codec.decode_gbps > 0 ? b.decode_scale * 4.0 * floats / (b.codec.decode_gbps * 1e9)
                                 : 0.0;
}

double fill_s(const SimBucket& b, double floats) {  // SimBucket::fill_gbps
  return b.fill_gbps > 0 ? 4.0 * floats / (b.fill_gbps * 1e9) : 0.0;
}

// Two_phase regions: ceil(n / P) floats, the largest of the near-equal regions.
std::int64_t region_floats(std::int64_t n, int p) { return (n + p - 1) / p; }

// Two_phase regions [n j / P, n (j + 1) / P) (two_phase_region_begin): with P > n, P - n of
// them are empty, and an empty region has no message and no result (two_phase_aggregator.cpp).
// The simulator sent every rank message_bytes(1) for each (review, 2026-12-07).
std::int64_t nonempty_regions(std::int64_t n, int p) { return std::min<std::int64_t>(n, p); }
// Rank 0's region [0, n / P) is empty when P > n; region 1 when 2n < P.
bool region_nonempty(std::int64_t n, int p, std::int64_t j) { return n * (j + 1) / p > n * j / p; }

// The tree's broadcast of the global index set (gtopk_aggregator.cpp): k indices as int32
// (its count goes before it, a control message).
double tree_index_set_bytes(double k) { return 4.0 * k; }

// Note [Control messages]: the sizes and counts that travel before a payload, one int64 each.
constexpr double kControlBytes = 8;

double ring_allreduce_sent(double bytes, double elem_bytes, int p) {
  const auto count = static_cast<std::size_t>(bytes / elem_bytes);
  return static_cast<double>(
      comm::ring_allreduce_bytes(count, static_cast<std::size_t>(elem_bytes), 0, p).sent);
}

// comm/byte_model.h's ring_allgatherv_bytes and alltoallv_bytes on rank 0 for P equal blocks,
// in closed form: every block but one, (P-1) m. They built P-length count vectors for each
// bucket of each evaluation, which made `simulate --plan auto --world 1048576` take 22 s
// (review, 2026-12-07); tests/sim/step_model_test.cpp checks them against byte_model.
double ring_allgather_sent(double message, int p) {
  return p > 1 ? (p - 1.0) * static_cast<double>(static_cast<std::size_t>(message)) : 0.0;
}

double alltoall_sent(double block, int p) {
  return p > 1 ? (p - 1.0) * static_cast<double>(static_cast<std::size_t>(block)) : 0.0;
}

// Note [Control messages]: the time of a bucket's control messages.
double control_s(const SimBucket& b, const StepOptions& o) {
  const int p = o.world_size;
  switch (b.kind) {
    case CommKind::kAllgather:
      return b.sizes_exchanged ? allgather_s(o.gather, kControlBytes, p, o.link) : 0.0;
    case CommKind::kTwoPhase:
      return alltoall_s(o.gather, kControlBytes, p, o.link) +
             allgather_s(o.gather, kControlBytes, p, o.link);
    case CommKind::kTree:  // k, a header per round, the index set's count
      return broadcast_s(o.allreduce, kControlBytes, p, o.link) +
             ceil_log2(p) * (o.link.alpha_s + kControlBytes * o.link.beta_s_per_byte) +
             broadcast_s(o.allreduce, kControlBytes, p, o.link);
    case CommKind::kDenseAllreduce:
    case CommKind::kAllreduce:
    case CommKind::kPowerSgd:
    case CommKind::kTiedRows:  // its counts allgather is part of its payload's pricing
      return 0.0;
  }
  return 0.0;
}

// Note [Control messages]: their bytes, as the communicator counts them on rank 0.
double control_sent(const SimBucket& b, int p) {
  switch (b.kind) {
    case CommKind::kAllgather:
      return b.sizes_exchanged ? ring_allgather_sent(kControlBytes, p) : 0.0;
    case CommKind::kTwoPhase:
      return alltoall_sent(kControlBytes, p) + ring_allgather_sent(kControlBytes, p);
    case CommKind::kTree:  // the root starts both chain broadcasts and sends no tree header
      return 2.0 * kControlBytes;
    case CommKind::kDenseAllreduce:
    case CommKind::kAllreduce:
    case CommKind::kPowerSgd:
    case CommKind::kTiedRows:
      return 0.0;
  }
  return 0.0;
}

// Note [Control messages]: the step's agreement on non-finite buckets, one int32 summed.
double agreement_s(const StepOptions& o) {
  return allreduce_s(o.allreduce, 4, o.world_size, o.link);
}

// The payload's collectives, encode and decode (step_model.h's table).
double payload_cost_s(const SimBucket& b, const StepOptions& o) {
  const int p = o.world_size;
  const double n = static_cast<double>(b.numel);
  switch (b.kind) {
    case CommKind::kDenseAllreduce:
      return allreduce_s(o.allreduce, n * b.wire_elem_bytes, p, o.link);
    case CommKind::kAllreduce:
      return encode_s(b, n) + allreduce_s(o.allreduce, n * b.wire_elem_bytes, p, o.link) +
             decode_s(b, n);
    case CommKind::kPowerSgd:  // q_bytes = 0: alternate, one allreduce a step
      return encode_s(b, n) + allreduce_s(o.allreduce, b.p_bytes, p, o.link) +
             (b.q_bytes > 0 ? allreduce_s(o.allreduce, b.q_bytes, p, o.link) : 0.0) +
             decode_s(b, n);
    case CommKind::kAllgather:
      return encode_s(b, n) + allgather_s(o.gather, b.message_bytes(b.numel), p, o.link) +
             fill_s(b, n) + p * decode_s(b, n);
    case CommKind::kTwoPhase: {
      const std::int64_t region = region_floats(b.numel, p);
      const double message = b.message_bytes(region);
      const double r = static_cast<double>(region);
      // The owner of a region receives a message from every rank, P > n or not, so the
      // alltoallv keeps its P - 1 steps; only non-empty regions' results are decoded.
      const double phase1 = encode_s(b, n) + pairwise_alltoall_s(message, p, o.link) +
                            fill_s(b, r) + p * decode_s(b, r);
      if (!b.server_compression) return phase1 + allgather_s(o.gather, 4.0 * r, p, o.link);
      // Each region result is decoded by a kSet into its region: the whole bucket is filled.
      const double results = static_cast<double>(nonempty_regions(b.numel, p));
      return phase1 + encode_s(b, r) + allgather_s(o.gather, message, p, o.link) + fill_s(b, n) +
             results * decode_s(b, r);
    }
    case CommKind::kTree: {
      const double message = b.message_bytes(b.numel);
      const double k = b.kept(b.numel);
      const double index_set = tree_index_set_bytes(k);
      const int rounds = ceil_log2(p);
      // A merge by encode adds, per round on the root's path, the zero-fill of its dense sum
      // (dense_.assign), the second decode and the encode.
      const double merges =
          b.merges_by_encode ? rounds * (fill_s(b, n) + decode_s(b, n) + encode_s(b, n)) : 0.0;
      // The result is not decoded: the bucket is zero-filled and the k values written.
      return encode_s(b, n) + gtopk_tree_s(message, index_set, k, p, o.link, o.allreduce) +
             rounds * decode_s(b, n) + fill_s(b, n) + merges;
    }
    case CommKind::kTiedRows: {
      const double rows = static_cast<double>(b.rows);
      return allgather_s(o.gather, 8, p, o.link) + allgather_s(o.gather, 4 * rows, p, o.link) +
             allgather_s(o.gather, 4 * rows * static_cast<double>(b.dim), p, o.link);
    }
  }
  return 0;
}

// The payload's bytes on rank 0, the rank whose bytes_sent sparq's metrics report.
double payload_bytes_sent(const SimBucket& b, int p) {
  if (p <= 1) return 0;
  const double n = static_cast<double>(b.numel);
  switch (b.kind) {
    case CommKind::kDenseAllreduce:
    case CommKind::kAllreduce:
      return ring_allreduce_sent(n * b.wire_elem_bytes, b.wire_elem_bytes, p);
    case CommKind::kPowerSgd:
      return ring_allreduce_sent(b.p_bytes, 4, p) + ring_allreduce_sent(b.q_bytes, 4, p);
    case CommKind::kAllgather:
      return ring_allgather_sent(b.message_bytes(b.numel), p);
    case CommKind::kTwoPhase: {
      const std::int64_t region = region_floats(b.numel, p);
      const auto message = static_cast<double>(static_cast<std::size_t>(b.message_bytes(region)));
      const double result = b.server_compression ? message : 4.0 * static_cast<double>(region);
      // Rank 0 sends a message to each non-empty region but its own (alltoallv_bytes), and
      // forwards every non-empty region's result but its right neighbour's
      // (ring_allgatherv_bytes); with P <= n every region is non-empty: (P-1) of each.
      const auto nonempty = static_cast<double>(nonempty_regions(b.numel, p));
      const double messages = nonempty - (region_nonempty(b.numel, p, 0) ? 1 : 0);
      const double results = nonempty - (region_nonempty(b.numel, p, 1) ? 1 : 0);
      return messages * message + results * result;
    }
    case CommKind::kTree: {
      // Rank 0 is the tree's root: it receives every round's message and sends none, and
      // starts the index set's chain broadcast (it used to be the mean over ranks, which the
      // measured rank-0 figures it is validated against never show: review, 2026-12-05).
      const double k = b.kept(b.numel);
      return tree_index_set_bytes(k) + ring_allreduce_sent(4.0 * k, 4, p);
    }
    case CommKind::kTiedRows: {
      const double rows = static_cast<double>(b.rows);
      return ring_allgather_sent(8, p) + ring_allgather_sent(4 * rows, p) +
             ring_allgather_sent(4 * rows * static_cast<double>(b.dim), p);
    }
  }
  return 0;
}

}  // namespace

double step_control_s(const StepInput& in, const StepOptions& o) {
  const int p = o.world_size;
  if (p <= 1) return 0;
  return (in.polls_stop_signals ? allreduce_s(o.allreduce, kStopPollBytes, p, o.link) : 0.0) +
         (in.counts_targets ? allreduce_s(o.allreduce, kTargetCountBytes, p, o.link) : 0.0);
}

double step_control_bytes(const StepInput& in, int p) {
  if (p <= 1) return 0;
  // Rank 0's share of the ring, as the communicator counts it (the trainer's figure since
  // 2026-12-07, when it stopped counting the payload once).
  return (in.polls_stop_signals ? ring_allreduce_sent(kStopPollBytes, 4, p) : 0.0) +
         (in.counts_targets ? ring_allreduce_sent(kTargetCountBytes, 8, p) : 0.0);
}

double bucket_cost_s(const SimBucket& b, const StepOptions& o) {
  return payload_cost_s(b, o) + control_s(b, o);
}

double bucket_bytes_sent(const SimBucket& b, int p) {
  return p > 1 ? payload_bytes_sent(b, p) + control_sent(b, p) : 0.0;
}

StepResult simulate_step(const StepInput& in, const StepOptions& o) {
  SPARQ_CHECK(o.world_size >= 1, "world size {} < 1", o.world_size);
  SPARQ_CHECK(o.busy_comm_rate > 0 && o.busy_comm_rate <= 1, "busy_comm_rate {} outside (0, 1]",
              o.busy_comm_rate);
  const std::size_t layers = in.backward_s.size();
  // ready[i]: backward runs layers in reverse, so layer i is final after the intervals of
  // layers i..L-1.
  std::vector<double> ready(layers);
  // Note [Per-step control]: the step's control allreduces block before the forward.
  const double control = step_control_s(in, o);
  double t = control + in.forward_s;
  for (std::size_t i = layers; i-- > 0;) {
    t += in.backward_s[i];
    ready[i] = t;
  }
  const double backward_end = t;

  StepResult r;
  r.forward_ms = in.forward_s * 1e3;
  r.backward_ms = (backward_end - control - in.forward_s) * 1e3;
  r.control_ms = control * 1e3;
  r.bytes_sent = step_control_bytes(in, o.world_size);
  // (readiness during backward, position in in.buckets): the launch order, by when each bucket
  // completes, also with comm.overlap: false, whose scheduler holds the buckets until backward
  // ends and then submits them in that same readiness order (Note [Readiness launch order]);
  // ordering them by index there showed a wrong --buckets timeline (review, 2026-12-06).
  std::vector<std::pair<double, int>> order;
  for (std::size_t b = 0; b < in.buckets.size(); ++b) {
    const SimBucket& bucket = in.buckets[b];
    SPARQ_CHECK(bucket.ready_layer >= 0 && static_cast<std::size_t>(bucket.ready_layer) < layers,
                "bucket {}: ready layer {} out of range", bucket.index, bucket.ready_layer);
    order.emplace_back(ready[bucket.ready_layer], static_cast<int>(b));
  }
  std::stable_sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first < y.first;
    return in.buckets[x.second].index < in.buckets[y.second].index;
  });
  // Note [Control messages]: the last of the plan's buckets (not the tied rows' tail job)
  // ends with the step's non-finite agreement.
  std::size_t last_exchange = order.size();
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (in.buckets[order[i].second].kind != CommKind::kTiedRows) last_exchange = i;
  }
  double comm_free = 0;
  double comm_end = backward_end;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto [complete_s, pos] = order[i];
    const double ready_s = o.overlap ? complete_s : backward_end;  // held until B without overlap
    const SimBucket& bucket = in.buckets[pos];
    const bool agreement = o.world_size > 1 && i == last_exchange;
    const double start = std::max(ready_s, comm_free);
    const double cost =
        o.world_size > 1 ? bucket_cost_s(bucket, o) + (agreement ? agreement_s(o) : 0.0) : 0.0;
    double end = start + cost;
    if (o.busy_comm_rate < 1 && start < backward_end) {
      // Note [Communication under compute]: before backward_end the cost is worked off at
      // busy_comm_rate.
      const double busy_work = (backward_end - start) * o.busy_comm_rate;
      end = busy_work >= cost ? start + cost / o.busy_comm_rate
                              : backward_end + (cost - busy_work);
    }
    comm_free = end;
    comm_end = std::max(comm_end, end);
    const double sent = bucket_bytes_sent(bucket, o.world_size) +
                        (agreement ? ring_allreduce_sent(4, 4, o.world_size) : 0.0);
    r.bytes_sent += sent;
    r.buckets.push_back({bucket.index, ready_s * 1e3, start * 1e3, end * 1e3, sent});
  }
  r.comm_end_ms = comm_end * 1e3;
  r.exposed_comm_ms = (std::max(0.0, comm_end - backward_end) + control) * 1e3;
  r.step_ms = (std::max(backward_end, comm_end) + in.optimizer_s) * 1e3;
  return r;
}

double single_worker_step_ms(const StepInput& in) {
  return (in.forward_s + std::accumulate(in.backward_s.begin(), in.backward_s.end(), 0.0) +
          in.optimizer_s) *
         1e3;
}

}  // namespace sparq::sim
