// dgc (Deep Gradient Compression, Lin et al. 2018): top-k sparsification of a
// momentum-corrected accumulation, used WITH error feedback (the wrapper's residual is DGC's
// accumulator v). Per step, for the gradient g of a bucket:
//   local clipping:      g *= min(1, (clip_norm / sqrt(P)) / ||g||)   (clip_norm 0: off)
//   momentum correction: u = momentum * u + g;   v = v + u              (accumulate())
//   selection:           the k_t largest |v| (exact), k_t = round(rho_t n), sent as topk
//   momentum masking:    u = 0 and v = 0 at the sent positions          (v by the wrapper)
// Sparsity warm-up: rho_t = 0.25 (rho / 0.25)^(t / warmup_steps) for t < warmup_steps (an
// exponential ramp from 25% to the target density), then rho; no ramp when rho >= 0.25.
// EncodeContext::density, when set (compress.density_warmup_steps, which cannot be combined
// with warmup_steps), replaces rho_t.
// Message: the sparse f32 format of sparse_format.h, 12 + index bytes + 4 count.
// State: u (one f32 per bucket position), saved by save_state. Elastic resume: u is a
// per-rank pending accumulation, linear in the rank's gradients, so it merges by the mean
// rule (state_merge.h), like the residual v.
// Config keys: density (0, 1] = 0.001, momentum [0, 1) = 0.9, clip_norm [0, 1e30] = 0,
//              warmup_steps [0, 1e9] = 0.
// Mass: decoded message + new residual == u_t + old residual (the corrected gradient
// replaces g); contraction of the selection step: delta = k / n at the target density.
// The per-element math (the momentum, the clipping scale) is dgc_math.h's, shared with the
// CUDA twin, and the clipping norm a fixed-partition sum (span_stats.h).
#pragma once

#include <optional>
#include <utility>

#include "compress/compressor.h"
#include "compress/config.h"
#include "compress/topk_select.h"

namespace sparq::compress {

class DgcCompressor final : public Compressor {
 public:
  struct Options {
    double density = 0.001;
    double momentum = 0.9;
    double clip_norm = 0.0;
    std::int64_t warmup_steps = 0;
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit DgcCompressor(Options options) : options_(options) {}

  std::string_view name() const override { return "dgc"; }
  Aggregation aggregation() const override { return Aggregation::kAllgather; }
  // Sparse f32 lists, but not tree-mergeable: the momentum is masked at the positions dgc
  // itself selected. Its CUDA twin keeps the momentum on the device (dgc_device_codec.cpp).
  CompressorCapabilities capabilities() const override {
    return {.sparse_f32 = true,
            .own_density_warmup = options_.warmup_steps > 0,
            .position_state = true,
            .scales_by_span_norm = options_.clip_norm > 0,
            .device_twin = true};
  }
  std::unique_ptr<DeviceCodec> device_codec() const override;
  void accumulate(std::span<const float> g, std::span<float> e, const EncodeContext& ctx) override;
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t) const override {
    return std::nullopt;
  }
  double contraction_delta(std::size_t n) const override;
  std::optional<double> density() const override { return options_.density; }

  double density_at(std::int64_t step) const;  // rho_t of the warm-up schedule
  std::int64_t warmup_steps() const { return options_.warmup_steps; }
  std::span<const float> momentum_state() const { return u_; }
  void save_state(std::vector<std::uint8_t>& out) const override;
  Status load_state(std::span<const std::uint8_t> in) override;
  std::unique_ptr<StateMerge> state_merge(const MergeShape& shape) const override {
    return mean_floats_merge("dgc momentum", shape);
  }

 private:
  Options options_;
  TopkSelector selector_;
  std::vector<std::uint32_t> indices_;
  std::vector<float> kept_;  // a[indices_[j]], from the selection pass
  std::vector<float> u_;
  // The span accumulate() corrected last, {offset, size}; encode() masks the momentum only
  // for it. An encode without error feedback (a skipped step's zeros, a run without a
  // residual) picks k of values that hold no momentum: masking there wiped momentum that
  // was never sent (review, 2026-12-06). The CUDA twin masks only on its error-feedback path.
  std::optional<std::pair<std::size_t, std::size_t>> accumulated_;
};

// rho_t of the warm-up schedule above (shared with the CUDA twin).
double dgc_density_at(const DgcCompressor::Options& options, std::int64_t step);

}  // namespace sparq::compress
