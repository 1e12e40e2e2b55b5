#include "compress/threshold.h"

#include <limits>

#include "compress/device_codec.h"
#include "compress/sparse_format.h"

namespace sparq::compress {

Result<ThresholdCompressor::Options> ThresholdCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  // Magnitudes are compared as f32: a threshold that is 0 or subnormal there would keep
  // (nearly) every entry, zeros included, in a message larger than dense. So the smallest
  // accepted value is the smallest normal f32.
  SPARQ_ASSIGN_OR_RETURN(
      o.threshold,
      reader.real("threshold", 1e-3, static_cast<double>(std::numeric_limits<float>::min()), 1e30));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  return o;
}

std::unique_ptr<DeviceCodec> ThresholdCompressor::device_codec() const {
  return make_threshold_device_codec(options_.threshold);
}

void ThresholdCompressor::encode(std::span<const float> a, const EncodeContext&, Message& msg) {
  selector_.at_least(a, static_cast<float>(options_.threshold), indices_, &kept_);
  encode_sparse_pairs(indices_, kept_, a.size(), msg);
}


Status ThresholdCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  return check_sparse_f32(msg, n, name());
}

void ThresholdCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out,
                                 float alpha, DecodeMode mode, const EncodeContext&) const {
  decode_sparse_f32(msg, out, alpha, mode, name());
}

}  // namespace sparq::compress
