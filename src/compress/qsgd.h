// qsgd (Alistarh et al. 2017): per chunk of C values an f32 L2 norm ||x||; each value sent
// as sign(x) * l with l in 0..s drawn by stochastic rounding of s |x| / ||x||, so
// E[D(C(x))] = x (unbiased). Aggregated by allgather.
// Codes: c = sign * l + s in 0..2s, width w = bit_width(2 s) bits (s = 7: 4 bits, s = 127:
// 8 bits), packed like the block codec (8 codes per w bytes, chunks start byte-aligned).
// Message layout: f32 norms[ceil(n / C)], then codes, ceil(n * w / 8) bytes.
// Message bytes: 4 * ceil(n / C) + ceil(n * w / 8).
// Random numbers: Philox at (seed, step), stream (rank, bucket), counter = bucket position.
// Config keys: levels [1, 127] = 7, chunk (multiple of 8 in [8, 2^24]) = 512.
// Contraction: none (delta 0); it is unbiased with variance <= min(C / s^2, sqrt(C) / s)
// ||x||^2 per chunk.
#pragma once

#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

class QsgdCompressor final : public Compressor {
 public:
  struct Options {
    int levels = 7;
    std::size_t chunk = 512;
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit QsgdCompressor(Options options);

  std::string_view name() const override { return "qsgd"; }
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
  int code_bits() const { return bits_; }

 private:
  Options options_;
  int bits_;
};

}  // namespace sparq::compress
