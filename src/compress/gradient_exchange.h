// GradientExchange: what the WFBP scheduler runs for each launched bucket (DESIGN.md, "One
// iteration", step 4): error-feedback compensation, compression, the compressor's aggregation
// strategy, decompression and averaging, in place in the gradient buffer.
//
// It owns, per bucket of the plan, one compressor instance and one aggregator (both may keep
// per-bucket state: dgc's momentum, powersgd's Q, two_phase's server residual), and ONE
// residual buffer with the ParamStore's flat layout, so bucket b's error-feedback residual is
// exactly the range bucket b covers in the gradient buffer (checkpointed per rank as one
// flat array, like the optimizer state).
//
// Routing, decided per bucket and step from rank-identical inputs only (Note [Rank-identical
// collective order], communicator.h):
//   dense bucket (plan routing: biases, norms, small tensors)  -> in-place allreduce (avg) of
//                                                                 the gradient view, f32, no
//                                                                 residual, no staging copy
//   compress.name: none, or step < dense_warmup_steps          -> the same; the residual is
//                                                                 untouched
//   otherwise -> the configured compressor with its aggregation (or the `aggregation`
//               override), through ErrorFeedback unless error_feedback is off; during the
//               density warm-up (density_warmup_steps) with EncodeContext::density set by
//               warmup_density(), a function of the step only.
//
// Metrics per compressed bucket and step (error feedback on): ||e||^2 after the exchange and
// ||a||^2 of what the compressor was asked to send (rel_compression_error), and, with
// never_sent_window = N > 0, how many coordinates no message of the last N compressed steps
// carried (a uint32 stamp per parameter, 4 bytes each, and one scratch of the largest
// bucket). Neither changes any sent or kept value.
//
// Note [Non-finite local gradients]
// A NaN or Inf in this rank's gradient must never reach a residual or a message: in a residual
// it would poison every later step, in a message every rank's aggregate. So average_bucket()
// checks each bucket's local gradient BEFORE compression (host stores; a device store's
// buckets, dense ones included, are checked on the device by DeviceNonfiniteGuard,
// device_nonfinite.h, with the departure stated there). A non-finite bucket is replaced by zeros
// and goes through its usual collective WITHOUT error feedback (every rank still takes part, in the
// same order, so nothing hangs), leaving that bucket's residual as it was. The finite buckets of
// the step (on every rank) update their residuals as on any step; what they sent is dropped
// with the skipped step (docs/reliability.md, "Non-finite gradients"). The step's last bucket
// (the last to become ready; the same one on every rank) then agrees on a count of such
// buckets across ranks (one 4-byte allreduce per step when world > 1) and, when any rank had
// one, fills that bucket's averaged gradient with NaN on every rank: the stepper's one skip rule (a
// non-finite aggregate norm, data_parallel.cpp) then skips the step on all ranks alike.
//
// Threading: average_bucket() runs in the CommQueue's task, one bucket at a time; everything
// else is called from the compute thread while no bucket is in flight (after wait_all()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/bucket_averager.h"
#include "comm/bucket_plan.h"
#include "comm/communicator.h"
#include "compress/aggregation.h"
#include "compress/compressor.h"
#include "compress/config.h"
#include "compress/device_codec.h"
#include "compress/device_exchange.h"
#include "compress/device_low_rank.h"
#include "compress/device_nonfinite.h"
#include "compress/device_send_history.h"
#include "compress/device_tree.h"
#include "compress/device_two_phase.h"
#include "compress/error_feedback.h"
#include "core/buffer.h"
#include "core/param_store.h"

namespace sparq::compress {

struct GradientExchangeConfig {
  CompressConfig compress;  // the compressor of compressed buckets
  // A registered strategy name (aggregation.h), or "auto": the compressor's own strategy.
  std::string aggregation = "auto";
  std::string aggregation_key = "compress.aggregation";  // names `aggregation` in errors
  AggregatorOptions aggregator;                          // two_phase server compression
  bool error_feedback = true;
  std::int64_t dense_warmup_steps = 0;  // steps before compression starts
  // Steps of the density warm-up after dense_warmup_steps (0: off); needs a compressor with a
  // density (Compressor::density()). See warmup_density().
  std::int64_t density_warmup_steps = 0;
  // log.never_sent_window: the window N of never_sent_share() (0: off; needs error feedback).
  std::int64_t never_sent_window = 0;
  std::uint64_t seed = 0;  // the run's compression seed (same on all ranks)
  // Per-bucket choices of comm.plan: auto (empty, or one entry per plan bucket): "" keeps the
  // bucket's plan kind and `aggregation`, "dense" sends a compressed-region bucket as dense
  // f32, any other value is the strategy of that bucket's compressed messages. The choice
  // must be the same on every rank (Note [Rank-identical collective order]).
  std::vector<std::string> bucket_choice;
};

// One bucket's share of a step, for metrics.
struct BucketExchangeStats {
  bool compressed = false;           // false: sent dense (dense bucket or warm-up)
  std::size_t payload_bytes = 0;     // this rank's message bytes, all phases
  std::size_t dense_bytes = 0;       // 4 * floats in the bucket: what `none` would send
  double residual_sq = 0;            // ||e||^2 of the bucket's residual after the exchange
  double input_sq = 0;               // ||a||^2, a = g + e what the compressor was asked to send
                                     // (summed over two_phase's regions); error feedback only
  std::size_t unsent_in_window = 0;  // never_sent_window: coordinates not sent in the window
};

// The matrices powersgd (needs_matrix_layout) sees in `bucket`: every tensor of rank >= 2
// viewed as [shape[0], numel / shape[0]], or the whole rows of one the plan split there (a
// piece, MatrixSegment::piece). The gradient exchange and the simulator's planner both use it.
std::vector<MatrixSegment> bucket_matrices(const ParamStore& store, const comm::Bucket& bucket);

// The density of compressed step t (0 = the first step after dense_warmup_steps) under a
// density warm-up of T steps towards the configured rho: rho^min(1, (t + 1) / T), which decays
// exponentially from near 1 to exactly rho at t = T - 1 and stays there; rho when T == 0.
double warmup_density(double rho, std::int64_t t, std::int64_t warmup_steps);

// density_warmup_steps > 0 needs a compressor with a density, and not dgc's own warm-up; the
// error names `key`. The dense casts (none, fp16, bf16) accept it and ignore it.
Status check_density_warmup(const Compressor& c, std::int64_t warmup_steps, const std::string& key);

class GradientExchange final : public comm::BucketAverager {
 public:
  // Checks the configuration (unknown compressor or key, an aggregation the compressor
  // cannot use) and builds one compressor + aggregator per compressed bucket. powersgd gets
  // the bucket's weight matrices as its layout ([out, in...] tensors wholly inside it).
  static Result<std::unique_ptr<GradientExchange>> create(const ParamStore& store,
                                                          const comm::BucketPlan& plan,
                                                          const GradientExchangeConfig& config);

  // comm::BucketAverager, bound to the WFBP scheduler: averages `bucket` of the store's
  // gradient buffer across ranks, in place.
  Status average_bucket(comm::Communicator& comm, const comm::Bucket& bucket,
                        std::int64_t step) override;

  // True when step `step` sends compressed buckets (false during the dense warm-up).
  bool compressing_at(std::int64_t step) const;
  const std::vector<BucketExchangeStats>& last_stats() const;
  // A GPU store's received messages are validated on the device as they are decoded (the
  // CPU runs check_message before decoding instead); the verdicts reach the host after the
  // step. The first failure since the last call, as the CPU names it; ok on the CPU. Also
  // warns of the step's non-finite local gradients found on the device, as the CPU does.
  Status check_device_messages();
  // Sums of last_stats() over the buckets of the last communicated step.
  std::size_t last_payload_bytes() const;
  std::size_t last_dense_bytes() const;
  // ||e||_2 over every bucket's residual as the last exchange of each bucket left it (0
  // without error feedback). Measured on the engine thread while the bucket is still in
  // cache, so metrics cost the compute thread no pass over the residual.
  double residual_norm() const;
  // Of the last step, over its compressed buckets: sqrt(sum ||e||^2 / sum ||a||^2), and the
  // same per compressed bucket in plan order. nullopt / empty when no bucket was compressed
  // (dense warm-up, dense-only runs), without error feedback (e is not kept), or when this
  // rank's gradient was not finite in some bucket (the step is skipped).
  std::optional<double> rel_compression_error() const;
  std::vector<double> bucket_rel_errors() const;
  // never_sent_window = N: the share of the last step's compressed coordinates that none of
  // the last N compressed steps sent; nullopt when off, before N compressed steps of this
  // process (the history is not checkpointed, so a resumed run starts it again), or when the
  // last step was not compressed.
  std::optional<double> never_sent_share() const;
  // Note [Non-finite local gradients]: buckets of the last step whose local gradient was not
  // finite on this rank, and the count summed over all ranks (the step was skipped when > 0).
  int last_local_nonfinite_buckets() const { return local_nonfinite_; }
  int last_nonfinite_buckets_all_ranks() const { return nonfinite_all_ranks_; }

  const GradientExchangeConfig& config() const { return config_; }
  std::string compressor_name(int bucket) const;  // for the start-up plan table

  // Flat residual (the store's layout) and per-bucket compressor/aggregator state. On a GPU
  // store the residual lives on the device and this is its host copy: residual_to_host()
  // refreshes it (checkpoints), residual_to_device() installs it (resume); both synchronous,
  // no-ops on the CPU.
  std::span<float> residual() const;
  void residual_to_host();
  void residual_to_device();
  // The compressor and aggregator state of every compressed bucket, serialised, as u8 views
  // named "bucket<b>.compressor" and "bucket<b>.aggregator". The views stay valid until the
  // next save_state() call.
  std::vector<StateTensor> save_state();
  // Restores what save_state() returned (same names, in the same order; u8 views) on rank
  // `rank` of `world`. Each entry must fit its bucket as this rank holds it (dgc's momentum
  // one float per bucket position, two_phase's server residual one per position of this
  // rank's region): a state of another bucket plan or world size is an error naming the
  // bucket, never applied to other positions.
  // `saved_aggregations` (aggregation_names() of the saving run; empty when unknown) names the
  // strategy whose state a bucket holds when this run aggregates it otherwise.
  Status load_state(const std::vector<StateTensor>& state, int rank, int world,
                    const std::vector<std::string>& saved_aggregations = {});
  // Note [A server residual no server sends]: with compress.server_compression off, no
  // region owner re-compresses its region's result, so a two_phase server residual that
  // load_state() finds (saved by a run with it on, or re-partitioned by an elastic resume) has
  // nothing that would ever send it: it is mass the average still owes. load_state() holds it
  // aside and this call, made by every rank after load_state() (also when it was not called),
  // settles it: each rank's error-feedback residual over region j gains owner j's s_j, so the
  // mean that later exchanges send gains exactly s_j, as an elastic resume folds a server
  // residual that its new plan cannot take (train/elastic_resume.h). Buckets without error
  // feedback drop it, and say how much. Collective over `comm`: one allgather per two_phase
  // bucket when server compression is off, nothing when it is on. The figures are the same on
  // every rank.
  struct ServerResidualFold {
    std::vector<std::size_t> folded, dropped;  // buckets whose loaded s was not all zero
    double folded_mass = 0, dropped_mass = 0;  // sum |s| over them
  };
  Result<ServerResidualFold> fold_loaded_server_residual(comm::Communicator& comm);
  // Whether this rank loaded a server residual not all zero that the fold above will take
  // (local: the resume's log, before the fold).
  bool holds_loaded_server_residual() const;
  // Each bucket's aggregation strategy, in plan order ("none" for a dense bucket): what a
  // checkpoint records so that a resume can name the strategy its state belongs to.
  std::vector<std::string> aggregation_names() const;
  // Elastic resume: for each entry save_state() would return (same names, same order), the
  // owner's merge of what `old_world` ranks saved into this process's state as rank
  // `new_rank` of `new_world` (state_merge.h), with the bucket's flat range. Feed each the
  // old buckets' states that overlap it, then load_state() the results.
  std::vector<NamedStateMerge> state_merges(int old_world, int new_rank, int new_world) const;

 private:
  GradientExchange(const ParamStore& store, const comm::BucketPlan& plan,
                   GradientExchangeConfig config);
  struct PerBucket {
    std::unique_ptr<Compressor> compressor;  // null for dense buckets
    std::unique_ptr<Aggregator> aggregator;
    std::unique_ptr<ErrorFeedback> error_feedback;
    std::unique_ptr<SendHistory> send_history;       // never_sent_window > 0 only
    std::unique_ptr<DeviceCodec> device_codec;       // GPU stores (gradient_exchange_device.cpp)
    std::unique_ptr<DeviceLowRank> device_low_rank;  // GPU stores, powersgd (low_rank)
    // The bucket's alignment gaps (offsets inside the bucket), zeroed after each compressed
    // exchange when its compressor decodes a zero as non-zero (Note [Padding stays zero]).
    std::vector<ParamRange> padding;
    // Exchanged on the device (a GPU store's compressed bucket).
    bool on_device() const { return device_codec != nullptr || device_low_rank != nullptr; }
  };
  // GPU stores: checks that every compressed bucket can run on the device and sets up its
  // codec, the device residual and the device strategies (allgather, allreduce).
  Status prepare_device();
  // Runs the bucket's device strategy; returns the bytes this rank sent.
  Result<std::size_t> average_on_device(PerBucket& slot, const comm::Bucket& bucket,
                                        std::span<float> grads, comm::Communicator& comm,
                                        const EncodeContext& ctx);
  void allocate_send_history();
  void agree_on_nonfinite(comm::Communicator& comm, std::span<float> last_bucket,
                          std::int64_t step);
  // Whether the bucket's sends are stamped (on the host or on the device).
  bool tracks_sends(std::size_t bucket) const {
    return buckets_[bucket].send_history != nullptr ||
           (device_history_ != nullptr && buckets_[bucket].on_device());
  }
  std::uint32_t window_stamps() const {
    return static_cast<std::uint32_t>(config_.never_sent_window);
  }

  const ParamStore& store_;
  const comm::BucketPlan& plan_;
  GradientExchangeConfig config_;
  Buffer residual_;
  Buffer device_residual_;  // GPU stores with error feedback: the live residual
  std::unique_ptr<DeviceAllgather> device_allgather_;
  std::unique_ptr<DeviceAllreduce> device_allreduce_;
  std::unique_ptr<DeviceTwoPhase> device_two_phase_;  // with the buckets' server residuals
  std::unique_ptr<DeviceTree> device_tree_;
  // GPU stores with error feedback: ||a||^2 and ||e||^2 per bucket, read into stats_ when a
  // metric is first asked for after a step (read_device_metrics()).
  std::unique_ptr<DeviceBucketMetrics> device_metrics_;
  // GPU stores: the device validation's verdicts on received messages (made at the first
  // exchange, which knows the world size).
  std::unique_ptr<DeviceMessageChecks> device_checks_;
  // GPU stores with compressed buckets: Note [Non-finite local gradients] on the device, and
  // whether a bucket of the current step was checked (so that the step's end agrees).
  std::unique_ptr<DeviceNonfiniteGuard> device_nonfinite_;
  bool nonfinite_checked_ = false;
  // GPU stores with never_sent_window > 0: the device's send stamps and unsent counts.
  std::unique_ptr<DeviceSendHistory> device_history_;
  mutable bool device_metrics_read_ = true;
  void read_device_metrics() const;
  bool has_error_feedback(std::size_t bucket) const;
  std::vector<PerBucket> buckets_;
  mutable std::vector<BucketExchangeStats> stats_;  // mutable: read_device_metrics()
  std::vector<std::uint32_t> last_sent_;            // SendHistory stamps, the store's flat layout
  std::vector<float> decode_scratch_;               // shared by the buckets' send histories
  std::int64_t history_origin_ = -1;                // the first compressed step this process ran
  std::uint32_t history_stamp_ = 0;                 // 1-based compressed step of the last stamps
  std::vector<Message> saved_;                      // save_state()'s serialisations, two per bucket
  // Per bucket: the two_phase server residual load_state() held aside for
  // fold_loaded_server_residual() (server compression off; this rank's region).
  std::vector<std::vector<float>> unapplied_server_;
  int local_nonfinite_ = 0;          // this step, this rank (Note [Non-finite local gradients])
  int nonfinite_all_ranks_ = 0;      // agreed when the step's last bucket is exchanged
  std::int64_t counting_step_ = -1;  // the step the two counts and exchanged_in_step_ are of
  std::size_t exchanged_in_step_ = 0;
};

}  // namespace sparq::compress
