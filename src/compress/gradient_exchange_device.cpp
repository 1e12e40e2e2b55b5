// GradientExchange on a store that lives on a CUDA device (train.device: cuda): the compressed
// buckets go through their compressor's DeviceCodec and the device strategy of their
// aggregation (device_exchange.h, device_two_phase.h, device_tree.h), or, for powersgd, its
// whole low_rank exchange on the device (device_low_rank.h); the residual lives on the
// device, with a host copy for checkpoints.
// Dense buckets are averaged in place by the collective as on the CPU (gradient_exchange.cpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "compress/gradient_exchange.h"
#include "compress/powersgd.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/sync_copy.h"
#endif

namespace sparq::compress {

Status GradientExchange::prepare_device() {
  // The largest message and scratch any bucket can need: at density 1 while a density
  // warm-up may ask for it, else at the configured density.
  EncodeContext sizing;
  if (config_.density_warmup_steps > 0) sizing.density = 1.0;
  std::size_t max_capacity = 0, max_scratch = 0;
  for (const comm::Bucket& bucket : plan_.buckets()) {
    PerBucket& slot = buckets_[bucket.index];
    if (!slot.compressor) continue;
    const Compressor& c = *slot.compressor;
    const std::string where = fmt::format("bucket {} ({})", bucket.index, c.name());
    if (!c.capabilities().device_twin) {
      return Status::error(
          "{}: compress.name: {} has no GPU implementation yet (issue 17); "
          "with train.device: cuda use {}",
          where, c.name(), kDeviceCompressorsHint);
    }
    if (!device_strategy_built(slot.aggregator->name(), c.capabilities())) {
      return Status::error(
          "{}: {}: {} is not built on the GPU yet (issue 17); use allgather, two_phase or "
          "tree (or auto; allreduce for fp16 and bf16, low_rank for powersgd) with "
          "train.device: cuda",
          where, config_.aggregation_key, slot.aggregator->name());
    }
    if (slot.aggregator->name() == aggregation_name(Aggregation::kLowRank)) {
      // powersgd: the whole exchange is its twin (device_low_rank.h); no message codec.
      auto* psgd = dynamic_cast<PowerSgdCompressor*>(slot.compressor.get());
      if (psgd == nullptr) {
        return Status::error("{}: low_rank carries powersgd's factors only", where);
      }
      slot.device_low_rank = std::make_unique<DeviceLowRank>(*psgd);
      continue;
    }
    slot.device_codec = c.device_codec();
    if (!slot.device_codec) {
      return Status::error("{}: this sparq was built without CUDA, so it has no GPU codecs",
                           where);
    }
    const auto n = static_cast<std::size_t>(bucket.range.count);
    slot.device_codec->prepare(n, config_.error_feedback);
    max_capacity = std::max(max_capacity, slot.device_codec->capacity(n, sizing));
    max_scratch = std::max(max_scratch, slot.device_codec->scratch_bytes(n, sizing));
  }
  device_allgather_ = std::make_unique<DeviceAllgather>(max_capacity, max_scratch);
  device_nonfinite_ = std::make_unique<DeviceNonfiniteGuard>(plan_.size());
  device_allreduce_ = std::make_unique<DeviceAllreduce>(max_capacity);
  device_two_phase_ = std::make_unique<DeviceTwoPhase>(config_.aggregator.server_compression);
  device_tree_ = std::make_unique<DeviceTree>();
  if (config_.error_feedback) {
    device_residual_ =
        Buffer::device(static_cast<std::size_t>(store_.flat_numel()) * sizeof(float), true);
    std::size_t largest = 0;
    for (const comm::Bucket& bucket : plan_.buckets()) {
      largest = std::max(largest, static_cast<std::size_t>(bucket.range.count));
    }
    device_metrics_ = std::make_unique<DeviceBucketMetrics>(plan_.size(), largest);
    if (config_.never_sent_window > 0) {
      device_history_ = std::make_unique<DeviceSendHistory>(
          static_cast<std::size_t>(store_.flat_numel()), plan_.size(), largest);
    }
  }
  return Status::ok();
}

Result<std::size_t> GradientExchange::average_on_device(PerBucket& slot,
                                                        const comm::Bucket& bucket,
                                                        std::span<float> grads,
                                                        comm::Communicator& comm,
                                                        const EncodeContext& ctx) {
  float* residual = device_residual_.size() > 0
                        ? device_residual_.as<float>() + bucket.range.offset
                        : nullptr;
  // The metrics and the validation verdicts run on the exchange's own stream, around it.
  void* stream = device_exchange_stream(comm, store_.context());
  if (!device_checks_) {
    std::vector<std::string> names(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      if (buckets_[b].compressor) names[b] = std::string(buckets_[b].compressor->name());
    }
    device_checks_ = std::make_unique<DeviceMessageChecks>(std::move(names), comm.size());
  }
  std::uint32_t* invalid = device_checks_->begin(bucket.index, stream);
  if (residual) {
    device_metrics_->measure_input(bucket.index, grads.data(), residual, grads.size(), stream);
    device_metrics_read_ = false;
  }
  // Note [Non-finite local gradients]: a bucket that is not finite goes out as zeros.
  device_nonfinite_->check(bucket.index, grads.data(), grads.size(),
                           residual ? device_metrics_->input_stats(bucket.index) : nullptr, stream);
  nonfinite_checked_ = true;
  // dgc's feedback input (DeviceCodec::set_input_measurement) is measured by its one
  // whole-bucket encode under allgather. two_phase encodes per region, and the server's encode
  // must not count, so there the measure of ||g + e||^2 stands (docs/gpu.md).
  const bool allgather = slot.aggregator->name() == aggregation_name(Aggregation::kAllgather);
  if (slot.device_codec) {
    slot.device_codec->set_input_measurement(
        residual && allgather ? device_metrics_->input_stats(bucket.index) : nullptr);
  }
  // log.never_sent_window: the rank's own message, decoded where the stamps read it.
  float* own_decoded = device_history_ ? device_history_->decoded_scratch() : nullptr;
  std::size_t sent = 0;
  if (slot.device_low_rank) {
    SPARQ_RETURN_IF_ERROR(
        slot.device_low_rank->run(grads, residual, comm, ctx, store_.context(), own_decoded));
    sent = slot.device_low_rank->last_payload_bytes();
  } else if (slot.aggregator->name() == aggregation_name(Aggregation::kAllreduce)) {
    SPARQ_RETURN_IF_ERROR(device_allreduce_->run(grads, *slot.device_codec,
                                                 slot.compressor->wire_dtype(), residual, comm, ctx,
                                                 store_.context(), own_decoded));
    sent = device_allreduce_->last_payload_bytes();
  } else if (slot.aggregator->name() == aggregation_name(Aggregation::kTwoPhase)) {
    SPARQ_RETURN_IF_ERROR(device_two_phase_->run(bucket.index, grads, *slot.device_codec, residual,
                                                 comm, ctx, store_.context(), invalid,
                                                 own_decoded));
    sent = device_two_phase_->last_payload_bytes();
  } else if (slot.aggregator->name() == aggregation_name(Aggregation::kTree)) {
    // The tree needs a density (reselectable sparse compressors have one).
    const std::optional<double> density = slot.compressor->density();
    if (!density) {
      return Status::error("bucket {} ({}): the tree strategy needs a compressor with a density",
                           bucket.index, slot.compressor->name());
    }
    const bool by_encode = tree_merges_by_encode(slot.compressor->capabilities());
    SPARQ_RETURN_IF_ERROR(device_tree_->run(grads, *slot.device_codec, *density, by_encode,
                                            residual, comm, ctx, store_.context(), invalid,
                                            own_decoded));
    sent = device_tree_->last_payload_bytes();
  } else {
    SPARQ_RETURN_IF_ERROR(device_allgather_->run(grads, *slot.device_codec, residual, comm, ctx,
                                                 store_.context(), invalid, own_decoded));
    sent = device_allgather_->last_payload_bytes();
  }
  if (device_history_) {
    device_history_->record(bucket.index, static_cast<std::size_t>(bucket.range.offset),
                            grads.size(), history_stamp_, window_stamps(), stream);
  }
  if (residual) device_metrics_->measure_residual(bucket.index, residual, grads.size(), stream);
  device_checks_->finish(bucket.index, stream);
  return sent;
}

Status GradientExchange::check_device_messages() {
  if (device_nonfinite_) {
    const DeviceNonfiniteGuard::Verdict v = device_nonfinite_->read();
    // Steps are 1-based in what users read, as the CPU's warnings (gradient_exchange.cpp).
    if (!v.buckets.empty()) {
      spdlog::warn(
          "step {}: rank {}: non-finite local gradient in bucket {} (found on the GPU): "
          "sent as zeros; the step is skipped on all ranks",
          v.step + 1, v.rank, v.buckets.front());
    }
    if (v.all_ranks > 0 && v.rank == 0) {
      spdlog::warn(
          "step {}: {} bucket(s) with a non-finite local gradient across the ranks: "
          "step skipped on all ranks",
          v.step + 1, v.all_ranks);
    }
    local_nonfinite_ = static_cast<int>(v.buckets.size());
    nonfinite_all_ranks_ = v.all_ranks;
  }
  return device_checks_ ? device_checks_->check() : Status::ok();
}

void GradientExchange::read_device_metrics() const {
  if (device_metrics_read_ || !device_metrics_) return;
  device_metrics_read_ = true;
  for (std::size_t b = 0; b < stats_.size(); ++b) {
    if (!stats_[b].compressed || !buckets_[b].on_device()) continue;
    const DeviceBucketMetrics::Values v = device_metrics_->read(b);
    stats_[b].input_sq = v.input_sq;
    stats_[b].residual_sq = v.residual_sq;
    if (device_history_) stats_[b].unsent_in_window = device_history_->read(b);
  }
}

void GradientExchange::residual_to_host() {
  if (device_residual_.size() == 0) return;
#if SPARQ_HAS_CUDA
  // After the last exchange, which may still be queued.
  cuda::copy_synchronously(residual_.data(), device_residual_.data(), device_residual_.size());
#endif
}

void GradientExchange::residual_to_device() {
  if (device_residual_.size() == 0) return;
#if SPARQ_HAS_CUDA
  cuda::copy_synchronously(device_residual_.data(), residual_.data(), device_residual_.size());
#endif
}

}  // namespace sparq::compress
