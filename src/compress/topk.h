// topk and topk_sampled: keep k = round(density * n) entries of largest |a| (at least 1),
// send them as a sparse f32 message (sparse_format.h), aggregate by allgather.
//   topk:          exactly k entries (TopkSelector::exact: radix selection, O(n)).
//   topk_sampled:  between ceil(0.8 k) and floor(1.3 k) entries, threshold estimated from a
//                  ~1% sample drawn with Philox at (step, rank, bucket) (TopkSelector::sampled).
// Message bytes: 12 + min(delta varint bytes, ceil(n / 8)) + 4 * count.
//   gtopk:         the same local message (exact k); aggregated by the tree strategy
//                  (gtopk_aggregator.h), which agrees on a global top-k set.
// Config keys: density (0, 1], default 0.01 (EncodeContext::density overrides it per step).
// Contraction: the kept entries are the count largest, so delta = count / n >= k / n (exact)
// or ceil(0.8 k) / n (sampled).
#pragma once

#include "compress/compressor.h"
#include "compress/config.h"
#include "compress/topk_select.h"

namespace sparq::compress {

class TopkCompressor final : public Compressor {
 public:
  struct Options {
    double density = 0.01;
    bool sampled = false;
    bool global = false;  // gtopk
    static Result<Options> parse(ConfigReader& reader, bool sampled, bool global = false);
  };
  explicit TopkCompressor(Options options) : options_(options) {}

  std::string_view name() const override {
    return options_.global ? "gtopk" : options_.sampled ? "topk_sampled" : "topk";
  }
  Aggregation aggregation() const override {
    return options_.global ? Aggregation::kTree : Aggregation::kAllgather;
  }
  // The tree merge sums and re-selects its lists (all three, gtopk being topk under tree).
  // Both selections have a CUDA twin (device_codec.h); the sampled one's count varies.
  CompressorCapabilities capabilities() const override {
    return {.sparse_f32 = true,
            .reselectable = true,
            .device_twin = true,
            .count_varies = options_.sampled};
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
  double contraction_delta(std::size_t n) const override;
  std::optional<double> density() const override { return options_.density; }

 private:
  Options options_;
  TopkSelector selector_;
  std::vector<std::uint32_t> indices_;
  std::vector<float> kept_;  // a[indices_[j]], from the selection pass
};

}  // namespace sparq::compress
