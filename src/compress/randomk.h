// randomk: keep k = round(density * n) entries chosen at random, the SAME positions on every
// rank (the index set is a function of seed, step, bucket and region only), so no indices
// are sent; aggregated by allgather (the sum over ranks is dense at those k positions).
// Selection is stratified: the span is cut into k strata [j n / k, (j + 1) n / k) and one
// position is drawn uniformly in each, which gives exactly k distinct ascending positions and
// lets encode and decode regenerate them in parallel.
// Message layout: f32 values[k] in position order. Message bytes: 4 k.
// Values are sent unscaled (the error-feedback form): E ||a - D(C(a))||^2 = (1 - k/n) ||a||^2
// in expectation over the draw, but no deterministic contraction (contraction_delta = 0).
// Config keys: density (0, 1] = 0.01. EncodeContext::density overrides it per step (encode and
// decode both follow it, so k and the message size do; fixed_message_bytes is at the
// configured density).
#pragma once

#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

class RandomkCompressor final : public Compressor {
 public:
  struct Options {
    double density = 0.01;
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit RandomkCompressor(Options options) : options_(options) {}

  std::string_view name() const override { return "randomk"; }
  Aggregation aggregation() const override { return Aggregation::kAllgather; }
  CompressorCapabilities capabilities() const override { return {.device_twin = true}; }
  std::unique_ptr<DeviceCodec> device_codec() const override;
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override;
  double contraction_delta(std::size_t) const override { return 0.0; }
  std::optional<double> density() const override { return options_.density; }

  // The k positions for a span of n at this context (ascending; k at the context's density).
  std::vector<std::uint32_t> positions(std::size_t n, const EncodeContext& ctx) const;

 private:
  Options options_;
};

}  // namespace sparq::compress
