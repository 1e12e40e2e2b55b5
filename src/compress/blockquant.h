// blockquant: every value quantized to b bits, one f16 scale per block of B values
// (block_codec.h), aggregated by allgather (scales differ per rank, so messages cannot be
// summed). No header: n, b and B are known to every rank.
// Message layout: f16 scales[ceil(n / B)], then codes, ceil(n * b / 8) bytes.
// Message bytes: 2 * ceil(n / B) + ceil(n * b / 8)   (b = 4, B = 256: 0.1270 of dense f32).
// Config keys: bits {2, 3, 4, 8} = 4, block (multiple of 8 in [8, 65536]) = 256,
//              rounding {nearest, stochastic} = nearest.
// Error: nearest rounding errs by at most s/2 per value (s = the block's scale); stochastic
// rounding is unbiased. Contraction: blockquant_delta() in options.h, (1 - c^2/(4 L^2)) / B.
#pragma once

#include "compress/block_codec.h"
#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

class BlockQuantCompressor final : public Compressor {
 public:
  struct Options {
    BlockQuantParams quant;
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit BlockQuantCompressor(Options options) : options_(options) {}

  std::string_view name() const override { return "blockquant"; }
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
    return blockquant_run_bytes(n, options_.quant);
  }
  double contraction_delta(std::size_t n) const override;

 private:
  Options options_;
};

}  // namespace sparq::compress
