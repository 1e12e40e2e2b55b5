// threshold: keep every entry with |a| >= threshold (a fixed magnitude, not a density), sent
// as a sparse f32 message (sparse_format.h), aggregated by allgather. The count, and so the
// size, depends on the data; a bucket with nothing above the threshold sends a 12-byte
// message with count 0 (it still takes part in the collective).
// Message bytes: 12 + min(delta varint bytes, ceil(n / 8)) + 4 * count.
// Config keys: threshold (0, 1e30], default 1e-3.
// Contraction: none guaranteed (delta 0): with error feedback the residual grows until its
// entries cross the threshold.
#pragma once

#include "compress/compressor.h"
#include "compress/config.h"
#include "compress/topk_select.h"

namespace sparq::compress {

class ThresholdCompressor final : public Compressor {
 public:
  struct Options {
    double threshold = 1e-3;
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit ThresholdCompressor(Options options) : options_(options) {}

  std::string_view name() const override { return "threshold"; }
  Aggregation aggregation() const override { return Aggregation::kAllgather; }
  // Sparse f32 lists, but not tree-mergeable: each rank keeps its own count.
  CompressorCapabilities capabilities() const override {
    return {.sparse_f32 = true, .device_twin = true, .count_varies = true};
  }
  std::unique_ptr<DeviceCodec> device_codec() const override;
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t) const override {
    return std::nullopt;
  }
  double contraction_delta(std::size_t) const override { return 0.0; }

 private:
  Options options_;
  TopkSelector selector_;
  std::vector<std::uint32_t> indices_;
  std::vector<float> kept_;  // a[indices_[j]], from the selection pass
};

}  // namespace sparq::compress
