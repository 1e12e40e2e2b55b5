// terngrad (Wen et al. 2017): clip to [-c sigma, c sigma] (sigma = standard deviation of the
// span), then send each clipped value x as s * sign(x) * b with s = max |clipped| and
// b ~ Bernoulli(|x| / s): E[D(C(a))] = clip(a), unbiased for the clipped gradient (and for a
// itself when nothing is clipped). Aggregated by allgather.
// Message layout: f32 s, then 2-bit codes t + 1 (t in {-1, 0, 1}) packed 4 per byte
// (value i in bits [2 (i % 4), 2 (i % 4) + 2) of byte i / 4).
// Message bytes: 4 + ceil(n / 4).
// Random numbers: Philox at (seed, step), stream (rank, bucket), counter = bucket position.
// Config keys: clip_sigma (0, 100] = 2.5.
// Contraction: none (delta 0).
#pragma once

#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

class TernGradCompressor final : public Compressor {
 public:
  struct Options {
    double clip_sigma = 2.5;
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit TernGradCompressor(Options options) : options_(options) {}

  std::string_view name() const override { return "terngrad"; }
  Aggregation aggregation() const override { return Aggregation::kAllgather; }
  CompressorCapabilities capabilities() const override { return {.device_twin = true}; }
  std::unique_ptr<DeviceCodec> device_codec() const override;
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override {
    return 4 + (n + 3) / 4;
  }
  double contraction_delta(std::size_t) const override { return 0.0; }

 private:
  Options options_;
};

}  // namespace sparq::compress
