// The dense, summable compressors, aggregated by allreduce:
//   none: the message is the bucket itself, f32[n] (4n bytes). Lossless.
//   fp16: f16[n] of a / P (2n bytes); bf16: bf16[n] of a / P (2n bytes).
// The 16-bit casts scale by 1/P BEFORE the cast so that the sum of P messages, formed in the
// 16-bit type by the collective, cannot overflow where a single gradient did not (both also
// saturate at cast16_sum_limit(P): Note [fp16 sums stay finite], core/half_math.h); decoding
// multiplies by P again: D(m) = P * float(m), a linear map, so D(sum of m) = sum of D(m).
// Config keys: none.
#pragma once

#include "compress/compressor.h"

namespace sparq::compress {

class DenseCastCompressor final : public Compressor {
 public:
  enum class Format { kF32, kF16, kBF16 };
  explicit DenseCastCompressor(Format format) : format_(format) {}

  std::string_view name() const override;
  Aggregation aggregation() const override { return Aggregation::kAllreduce; }
  // fp16 and bf16 have a CUDA twin (device_codec.h), summed on the device by allreduce.
  CompressorCapabilities capabilities() const override {
    return {.summable = true, .sends_every_entry = true, .device_twin = format_ != Format::kF32};
  }
  std::unique_ptr<DeviceCodec> device_codec() const override;
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override {
    return n * (format_ == Format::kF32 ? 4 : 2);
  }
  DType wire_dtype() const override;
  // none loses nothing (delta 1). The 16-bit casts lose at most a relative 2^-11 (f16) or
  // 2^-8 (bf16) per value: delta = 1 - (2^-11)^2 or 1 - (2^-8)^2, while a / P stays in the
  // normal range of the format.
  double contraction_delta(std::size_t n) const override;

 private:
  Format format_;
};

}  // namespace sparq::compress
