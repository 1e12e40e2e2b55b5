// The 1-bit compressors: one f32 scale and one sign bit per value, D(m)_i = +-scale.
//   signsgd: scale = mean |a| = ||a||_1 / n (EF-signSGD, Karimireddy et al. 2019); allgather.
//            ||a - D(C(a))||^2 = ||a||^2 - ||a||_1^2 / n, so delta = ||a||_1^2/(n ||a||^2)
//            >= 1 / n (the documented bound).
//   onebit:  scale = ||a||_2 / sqrt(n) (the 1-bit Adam compressor); two_phase exchange with
//            a server-side residual at each region owner. No deterministic contraction
//            (delta 0): error feedback on both sides carries what the sign drops.
// Message layout: f32 scale, then ceil(n / 8) bytes of signs, bit (i % 8) of byte i / 8 set
// when a_i < 0 (zero decodes to +scale). Message bytes: 4 + ceil(n / 8).
// Config keys: none.
#pragma once

#include "compress/compressor.h"

namespace sparq::compress {

class SignCompressor final : public Compressor {
 public:
  enum class Kind { kSignSgd, kOneBit };
  explicit SignCompressor(Kind kind) : kind_(kind) {}

  std::string_view name() const override { return kind_ == Kind::kSignSgd ? "signsgd" : "onebit"; }
  Aggregation aggregation() const override {
    return kind_ == Kind::kSignSgd ? Aggregation::kAllgather : Aggregation::kTwoPhase;
  }
  CompressorCapabilities capabilities() const override {
    return {.device_twin = true, .zero_decodes_to_zero = false};
  }
  std::unique_ptr<DeviceCodec> device_codec() const override;
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override {
    return 4 + (n + 7) / 8;
  }
  double contraction_delta(std::size_t n) const override {
    return kind_ == Kind::kSignSgd ? 1.0 / static_cast<double>(n) : 0.0;
  }

 private:
  Kind kind_;
};

}  // namespace sparq::compress
