// lbs (low-bit sparsified): the method sparq is built around. Of a = g + e (error feedback
// is the wrapper's job) keep the k = round(density * n) largest |a| (exact radix selection, or
// the sampled DGC-style threshold), quantize the kept values, in index order, with the block
// codec (b bits, one f16 absmax scale per B kept values), and code the indices as delta
// varints or a bitmap, whichever is smaller. Decoding gives q * s at the kept positions and 0
// elsewhere, so the single residual e = a - D(m) holds both the dropped values and the
// quantization error of the kept ones.
//
// Message layout (sparse_format.h prefix with value_bits = b, then a block-codec run):
//   [12-byte header][index section][f16 scales x ceil(k / B)][codes, ceil(k * b / 8) bytes]
// Message bytes: 12 + min(delta varint bytes, ceil(n / 8)) + 2 * ceil(k / B) + ceil(k * b / 8)
//   (rho = 0.01, b = 4, B = 256: about 0.0045 of dense f32, bench_compress's figure, with
//   gaps of 1-2 varint bytes; the index section dominates).
//
// k follows EncodeContext::density when it is set (the density warm-up).
// Config keys: density (0, 1] = 0.01, bits {2, 3, 4, 8} = 4, block = 256,
//              rounding {nearest, stochastic} = nearest, selection {exact, sampled} = exact.
// Aggregation: allgather; two_phase, and with exact selection tree (lists merged by decode and
// encode: Note [The tree re-selects from the dense sum]), through compress.aggregation (the
// former key compress.lbs.exchange is refused with that hint).
// Contraction (nearest rounding, exact selection): ||a - D(C(a))||^2 =
//   ||dropped||^2 + ||quantization error||^2 <= ||a||^2 - delta_bq ||kept||^2 and
//   ||kept||^2 >= (k / n) ||a||^2, so delta = delta_bq * k / n (blockquant_delta, options.h).
#pragma once

#include "compress/block_codec.h"
#include "compress/compressor.h"
#include "compress/config.h"
#include "compress/topk_select.h"

namespace sparq::compress {

class LbsCompressor final : public Compressor {
 public:
  struct Options {
    double density = 0.01;
    BlockQuantParams quant;
    bool sampled = false;
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit LbsCompressor(Options options) : options_(options) {}

  std::string_view name() const override { return "lbs"; }
  Aggregation aggregation() const override { return Aggregation::kAllgather; }
  // Both selections have a CUDA twin (device_codec.h); the sampled one's count varies. The
  // exact one's lists merge by encode in the tree (its k is the density's).
  CompressorCapabilities capabilities() const override {
    return {.device_twin = true,
            .merges_by_encode = !options_.sampled,
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
  std::vector<float> kept_;
  mutable std::vector<float> decoded_;  // decode scratch; a compressor serves one bucket
};

}  // namespace sparq::compress
