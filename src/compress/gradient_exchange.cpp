#include "compress/gradient_exchange.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compress/device_exchange.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "core/check.h"
#include "core/fault.h"
#include "core/ops.h"

namespace sparq::compress {
namespace {

double relative(double error_sq, double input_sq) {
  return input_sq > 0 ? std::sqrt(error_sq / input_sq) : 0.0;  // nothing asked, nothing lost
}

}  // namespace

// The layout of a compressor with needs_matrix_layout (powersgd): every tensor of rank >= 2
// in the bucket, viewed as [shape[0], numel / shape[0]] (a linear weight [out, in], a conv
// weight [out, in*kh*kw]). A tensor the plan split over several buckets (one larger than
// bucket_mb, such as a big vocabulary's embedding) contributes the whole rows that lie in
// this bucket, a matrix [rows here, cols] of its own (DDP's PowerSGD hook compresses such a
// tensor whole; sending it dense cost gpt2-30m's 19.3M-element wte 77 MB a step). The fringe
// of partial rows at a cut, a piece with fewer rows than powersgd's rank (MatrixSegment::piece)
// and 1-D tensors stay dense.
std::vector<MatrixSegment> bucket_matrices(const ParamStore& store, const comm::Bucket& bucket) {
  std::vector<MatrixSegment> segments;
  for (const ParamEntry& e : store.entries()) {
    const Shape& shape = e.spec.shape;
    if (shape.ndim() < 2 || e.numel == 0) continue;
    const std::int64_t lo = std::max(e.offset, bucket.range.offset);
    const std::int64_t hi = std::min(e.offset + e.numel, bucket.range.end());
    if (hi <= lo) continue;
    const std::int64_t cols = e.numel / shape[0];
    const std::int64_t first_row = (lo - e.offset + cols - 1) / cols;  // whole rows only
    const std::int64_t end_row = (hi - e.offset) / cols;
    if (end_row <= first_row) continue;
    const bool whole = lo == e.offset && hi == e.offset + e.numel;
    segments.push_back(
        {whole ? e.spec.name : fmt::format("{} rows {}..{}", e.spec.name, first_row, end_row),
         static_cast<std::size_t>(e.offset + first_row * cols - bucket.range.offset),
         static_cast<std::size_t>(end_row - first_row), static_cast<std::size_t>(cols), !whole});
  }
  return segments;
}

double warmup_density(double rho, std::int64_t t, std::int64_t warmup_steps) {
  if (warmup_steps <= 0 || t + 1 >= warmup_steps) return rho;  // exactly rho, no pow rounding
  const double progress = static_cast<double>(std::max<std::int64_t>(t, 0) + 1) /
                          static_cast<double>(warmup_steps);
  return std::pow(rho, progress);
}

Status check_density_warmup(const Compressor& c, std::int64_t warmup_steps,
                            const std::string& key) {
  // The dense casts (none, fp16, bf16) send every entry: the warm-up has nothing to do, and
  // accepting it lets a config with a warm-up run as its dense baseline with one override.
  const CompressorCapabilities caps = c.capabilities();
  if (warmup_steps == 0 || caps.sends_every_entry) return Status::ok();
  if (!c.density()) {
    return Status::error("{}: {} has no density to warm up (compressors with one: topk, "
                         "topk_sampled, gtopk, randomk, dgc, lbs); set it to 0",
                         key, c.name());
  }
  if (caps.own_density_warmup) {
    return Status::error("{}: cannot be combined with {}'s own sparsity warm-up "
                         "(compress.{}.warmup_steps); set one of them to 0",
                         key, c.name(), c.name());
  }
  return Status::ok();
}

GradientExchange::GradientExchange(const ParamStore& store, const comm::BucketPlan& plan,
                                   GradientExchangeConfig config)
    : store_(store), plan_(plan), config_(std::move(config)) {}

Result<std::unique_ptr<GradientExchange>> GradientExchange::create(
    const ParamStore& store, const comm::BucketPlan& plan, const GradientExchangeConfig& config) {
  SPARQ_CHECK(store.allocated(), "GradientExchange needs an allocated ParamStore");
  std::unique_ptr<GradientExchange> x(new GradientExchange(store, plan, config));
  x->buckets_.resize(plan.size());
  x->stats_.assign(plan.size(), BucketExchangeStats{});
  if (config.density_warmup_steps > 0) {
    SPARQ_ASSIGN_OR_RETURN(auto probe, make_compressor(config.compress));
    SPARQ_RETURN_IF_ERROR(check_density_warmup(*probe, config.density_warmup_steps,
                                               "compress.density_warmup_steps"));
  }

  if (!config.bucket_choice.empty() && config.bucket_choice.size() != plan.size()) {
    return Status::error("bucket choices: {} for a plan of {} buckets",
                         config.bucket_choice.size(), plan.size());
  }
  bool any_compressed = false;
  for (const comm::Bucket& bucket : plan.buckets()) {
    if (bucket.dense || config.compress.compression_off()) continue;
    const std::string& choice =
        config.bucket_choice.empty() ? std::string() : config.bucket_choice[bucket.index];
    if (choice == "dense") continue;
    PerBucket& slot = x->buckets_[bucket.index];
    SPARQ_ASSIGN_OR_RETURN(slot.compressor, make_compressor(config.compress));
    if (slot.compressor->capabilities().needs_matrix_layout) {
      SPARQ_RETURN_IF_ERROR(
          slot.compressor->set_layout(static_cast<std::size_t>(bucket.range.count),
                                      bucket_matrices(store, bucket))
              .with_context(fmt::format("bucket {}", bucket.index)));
    }
    SPARQ_ASSIGN_OR_RETURN(slot.aggregator,
                           make_aggregator(choice.empty() ? config.aggregation : choice,
                                           *slot.compressor, config.aggregator,
                                           config.aggregation_key));
    if (!slot.compressor->capabilities().zero_decodes_to_zero) {
      for (ParamRange gap : store.padding_in(bucket.range)) {
        gap.offset -= bucket.range.offset;
        slot.padding.push_back(gap);
      }
    }
    any_compressed = true;
  }
  const bool on_device = store.device() != Device::kCPU;
  if (any_compressed && on_device) SPARQ_RETURN_IF_ERROR(x->prepare_device());
  // Note [Non-finite local gradients]: a device store's dense buckets are checked there too.
  if (on_device && !x->device_nonfinite_) {
    x->device_nonfinite_ = std::make_unique<DeviceNonfiniteGuard>(plan.size());
  }
  if (any_compressed && config.error_feedback) {
    const auto n = static_cast<std::size_t>(store.flat_numel());
    // On a GPU store this is the host copy for checkpoints (residual_to_host()).
    x->residual_ = Buffer::host(n * sizeof(float), /*zeroed=*/true);
    if (on_device) return x;
    for (const comm::Bucket& bucket : plan.buckets()) {
      PerBucket& slot = x->buckets_[bucket.index];
      if (!slot.compressor) continue;
      slot.error_feedback = std::make_unique<ErrorFeedback>(
          x->residual().subspan(static_cast<std::size_t>(bucket.range.offset),
                                static_cast<std::size_t>(bucket.range.count)));
    }
    if (config.never_sent_window > 0) x->allocate_send_history();
  }
  return x;
}

void GradientExchange::allocate_send_history() {
  last_sent_.assign(static_cast<std::size_t>(store_.flat_numel()), 0);
  std::size_t longest = 0;
  for (const comm::Bucket& bucket : plan_.buckets()) {
    PerBucket& slot = buckets_[bucket.index];
    if (!slot.error_feedback) continue;
    const auto offset = static_cast<std::size_t>(bucket.range.offset);
    const auto count = static_cast<std::size_t>(bucket.range.count);
    slot.send_history =
        std::make_unique<SendHistory>(std::span(last_sent_).subspan(offset, count));
    longest = std::max(longest, count);
  }
  decode_scratch_.assign(longest, 0.0f);
  for (PerBucket& slot : buckets_) {
    if (!slot.send_history) continue;
    slot.error_feedback->track_sends(slot.send_history.get(), decode_scratch_);
  }
}

bool GradientExchange::compressing_at(std::int64_t step) const {
  return step >= config_.dense_warmup_steps;
}

Status GradientExchange::average_bucket(comm::Communicator& comm, const comm::Bucket& bucket,
                                  std::int64_t step) {
  PerBucket& slot = buckets_[bucket.index];
  std::span<float> grads(store_.grads() + bucket.range.offset,
                         static_cast<std::size_t>(bucket.range.count));
  EncodeContext ctx;
  ctx.seed = config_.seed;
  ctx.step = step;
  ctx.warmup_origin = config_.dense_warmup_steps;
  ctx.bucket_id = static_cast<std::uint32_t>(bucket.index);
  BucketExchangeStats& stats = stats_[bucket.index];
  stats.dense_bytes = grads.size() * sizeof(float);
  stats.compressed = slot.compressor != nullptr && compressing_at(step);
  // Note [Non-finite local gradients]: buckets run in readiness order (Note [Readiness launch
  // order], wfbp_scheduler.h), the same on every rank, and every bucket runs once a step: the
  // first of a new step resets the counts, the plan.size()-th agrees on them.
  if (step != counting_step_) {
    counting_step_ = step;
    exchanged_in_step_ = 0;
    local_nonfinite_ = nonfinite_all_ranks_ = 0;
    nonfinite_checked_ = false;
    if (device_nonfinite_) {
      device_nonfinite_->begin_step(step, device_exchange_stream(comm, store_.context()));
    }
  }
  Status failure;  // this bucket's, returned after the step's agreement (below)
  const bool finite = store_.device() != Device::kCPU || ops::all_finite(grads.data(), grads.size());
  if (!finite) {
    if (local_nonfinite_ == 0) {
      // Steps are 1-based in what users read (the progress line, metrics).
      spdlog::warn("step {}: rank {}: non-finite local gradient in bucket {}: sent as zeros, "
                   "kept out of the residual; the step is skipped on all ranks",
                   step + 1, comm.rank(), bucket.index);
    }
    ++local_nonfinite_;
    std::fill(grads.begin(), grads.end(), 0.0f);
  }
  if (stats.compressed) {
    fault::point("exchange.compressed", step);  // docs/reliability.md, "Fault injection"
    // The density warm-up: from step t + 1 == T on the compressor's own density (the same
    // value) is used, so the run after the warm-up is the run without one, bit for bit.
    // A compressor without a density (the dense casts, the only ones check_density_warmup
    // lets through) has nothing to warm up.
    const std::int64_t t = step - config_.dense_warmup_steps;
    const std::optional<double> rho = slot.compressor->density();
    if (rho && t + 1 < config_.density_warmup_steps) {
      ctx.density = warmup_density(*rho, t, config_.density_warmup_steps);
    }
    if (slot.error_feedback) slot.error_feedback->begin_step();
    if (tracks_sends(bucket.index)) {
      if (history_origin_ < 0) history_origin_ = step;
      history_stamp_ = static_cast<std::uint32_t>(step - history_origin_ + 1);
      if (slot.send_history) slot.send_history->begin_step(history_stamp_);
    }
    if (slot.on_device()) {  // a GPU store (gradient_exchange_device.cpp)
      Result<std::size_t> bytes = average_on_device(slot, bucket, grads, comm, ctx);
      if (bytes.is_ok()) {
        stats.payload_bytes = *bytes;
      } else {
        failure = bytes.status();
      }
      if (!slot.padding.empty()) {  // Note [Padding stays zero], core/param_store.h
        zero_device_ranges(grads.data(), slot.padding,
                           device_exchange_stream(comm, store_.context()));
      }
    } else {
      ErrorFeedback* ef = finite ? slot.error_feedback.get() : nullptr;
      failure = slot.aggregator->run(grads, *slot.compressor, ef, comm, ctx);
      stats.payload_bytes = slot.aggregator->last_payload_bytes();
      for (const ParamRange& gap : slot.padding) {  // Note [Padding stays zero]
        std::fill_n(grads.begin() + gap.offset, gap.count, 0.0f);
      }
    }
    if (slot.error_feedback) {
      const std::span<float> e = slot.error_feedback->residual();
      stats.residual_sq = ops::sum_squares(e.data(), e.size());
      stats.input_sq = slot.error_feedback->input_sq();
    }
    if (slot.send_history) {
      stats.unsent_in_window = slot.send_history->count_unsent(window_stamps());
    }
  } else {
    // Dense means in place (DESIGN.md, "The GPU path"), on either device: the gradient view
    // is averaged by the collective itself, with no staging copy, no zero-fill and no axpy
    // back. The average over one rank is the gradient itself (Note [A world of one on NCCL],
    // device_exchange.h: NCCL computes it anyway).
    if (store_.device() != Device::kCPU) {
      // Note [Non-finite local gradients]: checked, and zeroed if need be, on the stream that
      // averages it, so that the warning can name this rank (one read pass over the bucket,
      // as the CPU's all_finite).
      device_nonfinite_->check(bucket.index, grads.data(), grads.size(), nullptr,
                               device_exchange_stream(comm, store_.context()));
      nonfinite_checked_ = true;
    }
    if (exchanges_with_collective(comm)) {
      SPARQ_CHECK(comm.device() == store_.device(), "bucket {}: a {} communicator cannot average "
                  "{} gradients", bucket.index, comm.backend(), device_name(store_.device()));
      comm.allreduce(grads.data(), grads.data(), grads.size(), DType::kF32, comm::ReduceOp::kAvg);
    }
    stats.payload_bytes = grads.size_bytes();
  }
  // Counted and agreed even when this bucket failed: a strategy reports a bad message only on
  // the rank that received it (two_phase, tree), and a rank that skipped the step's last
  // collective would leave the others waiting in it (or pair it with the next task's).
  if (++exchanged_in_step_ == plan_.size()) agree_on_nonfinite(comm, grads, step);
  return failure;
}

void GradientExchange::agree_on_nonfinite(comm::Communicator& comm, std::span<float> last_bucket,
                                          std::int64_t step) {
  std::int32_t count = local_nonfinite_;
  // A device store's compressed buckets were checked on the device, whose guard agrees there
  // (device_nonfinite.h): the host count is 0 and a device communicator cannot take it.
  if (store_.device() != Device::kCPU) {
    nonfinite_all_ranks_ = 0;
    if (device_nonfinite_ && nonfinite_checked_) {
      device_nonfinite_->agree(comm, exchanges_with_collective(comm), last_bucket,
                               device_exchange_stream(comm, store_.context()));
    }
    return;
  }
  if (comm.size() > 1) comm.allreduce(&count, &count, 1, DType::kI32, comm::ReduceOp::kSum);
  nonfinite_all_ranks_ = count;
  if (count == 0) return;
  if (comm.rank() == 0) {
    spdlog::warn("step {}: {} bucket(s) with a non-finite local gradient across the ranks: "
                 "step skipped on all ranks", step + 1, count);
  }
  // The stepper skips a step whose aggregate norm is not finite: make it so on every rank.
  if (store_.device() == Device::kCPU) {
    std::fill(last_bucket.begin(), last_bucket.end(), std::numeric_limits<float>::quiet_NaN());
  }
}

std::size_t GradientExchange::last_payload_bytes() const {
  std::size_t total = 0;
  for (const BucketExchangeStats& s : stats_) total += s.payload_bytes;
  return total;
}

std::size_t GradientExchange::last_dense_bytes() const {
  std::size_t total = 0;
  for (const BucketExchangeStats& s : stats_) total += s.dense_bytes;
  return total;
}

std::span<float> GradientExchange::residual() const {
  return {residual_.as<float>(), residual_.size() / sizeof(float)};
}

bool GradientExchange::has_error_feedback(std::size_t bucket) const {
  return buckets_[bucket].error_feedback != nullptr ||
         (buckets_[bucket].on_device() && device_residual_.size() > 0);
}

const std::vector<BucketExchangeStats>& GradientExchange::last_stats() const {
  read_device_metrics();
  return stats_;
}

double GradientExchange::residual_norm() const {
  read_device_metrics();
  double sq = 0;
  for (const BucketExchangeStats& s : stats_) sq += s.residual_sq;
  return std::sqrt(sq);
}

std::optional<double> GradientExchange::rel_compression_error() const {
  read_device_metrics();
  // A bucket replaced by zeros (Note [Non-finite local gradients]) kept its old residual and
  // asked nothing: counted, it made the step's error look larger and its own 0 (review,
  // 2026-12-06). The step is skipped; this rank reports no error for it.
  if (local_nonfinite_ > 0) return std::nullopt;
  double error_sq = 0, input_sq = 0;
  bool any = false;
  for (std::size_t b = 0; b < stats_.size(); ++b) {
    if (!stats_[b].compressed) continue;
    if (!has_error_feedback(b)) return std::nullopt;
    error_sq += stats_[b].residual_sq;
    input_sq += stats_[b].input_sq;
    any = true;
  }
  if (!any) return std::nullopt;
  return relative(error_sq, input_sq);
}

std::vector<double> GradientExchange::bucket_rel_errors() const {
  std::vector<double> out;
  if (!rel_compression_error()) return out;
  for (const BucketExchangeStats& s : stats_) {
    if (s.compressed) out.push_back(relative(s.residual_sq, s.input_sq));
  }
  return out;
}

std::optional<double> GradientExchange::never_sent_share() const {
  if ((last_sent_.empty() && !device_history_) || history_stamp_ < window_stamps()) {
    return std::nullopt;
  }
  read_device_metrics();
  std::size_t unsent = 0, total = 0;
  for (std::size_t b = 0; b < stats_.size(); ++b) {
    if (!stats_[b].compressed || !tracks_sends(b)) continue;
    unsent += stats_[b].unsent_in_window;
    total += static_cast<std::size_t>(plan_.buckets()[b].range.count);
  }
  if (total == 0) return std::nullopt;
  return static_cast<double>(unsent) / static_cast<double>(total);
}

std::string GradientExchange::compressor_name(int bucket) const {
  const PerBucket& slot = buckets_[bucket];
  if (!slot.compressor) return "none";
  return fmt::format("{}/{}{}", slot.compressor->name(), slot.aggregator->name(),
                     has_error_feedback(static_cast<std::size_t>(bucket)) ? "+ef" : "");
}

std::vector<std::string> GradientExchange::aggregation_names() const {
  std::vector<std::string> out;
  for (const PerBucket& slot : buckets_) {
    out.emplace_back(slot.compressor ? slot.aggregator->name() : "none");
  }
  return out;
}

}  // namespace sparq::compress
