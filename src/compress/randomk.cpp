#include "compress/randomk.h"

#include "compress/byte_io.h"
#include "compress/device_codec.h"
#include "compress/options.h"
#include "compress/random_streams.h"
#include "compress/randomk_positions.h"
#include "compress/sparse_format.h"
#include "core/check.h"
#include "core/host_device.h"
#include "core/rng.h"

namespace sparq::compress {
namespace {

// Visits (j, position of stratum j) for the k strata of a span of n.
template <typename Fn>
void for_each_position(std::size_t n, std::size_t k, const EncodeContext& ctx, Fn&& fn) {
  const std::uint64_t key = step_key(ctx.seed, ctx.step);
  const std::uint64_t stream = compression_stream(ctx, /*rank=*/0);  // shared by all ranks
#pragma omp parallel for schedule(static) if (k > (1u << 14))
  for (std::size_t j = 0; j < k; ++j) fn(j, randomk_position(n, k, j, key, stream));
}

}  // namespace

Result<RandomkCompressor::Options> RandomkCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  SPARQ_ASSIGN_OR_RETURN(o.density, parse_density(reader));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  return o;
}

std::optional<std::size_t> RandomkCompressor::fixed_message_bytes(std::size_t n) const {
  return 4 * k_for(options_.density, n);
}

std::unique_ptr<DeviceCodec> RandomkCompressor::device_codec() const {
  return make_randomk_device_codec(options_.density);
}

std::vector<std::uint32_t> RandomkCompressor::positions(std::size_t n,
                                                        const EncodeContext& ctx) const {
  std::vector<std::uint32_t> out(k_for(density_for(options_.density, ctx), n));
  for_each_position(n, out.size(), ctx,
                    [&](std::size_t j, std::size_t pos) { out[j] = static_cast<std::uint32_t>(pos); });
  return out;
}

void RandomkCompressor::encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) {
  const std::size_t k = k_for(density_for(options_.density, ctx), a.size());
  msg.resize(4 * k);
  std::uint8_t* out = msg.data();
  for_each_position(a.size(), k, ctx,
                    [&](std::size_t j, std::size_t pos) { store_f32(out + 4 * j, a[pos]); });
}


Status RandomkCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  // k follows the step's density (ctx), exactly as encode() chose it.
  return check_message_size(*this, msg, n, 4 * k_for(density_for(options_.density, ctx), n));
}

void RandomkCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out,
                               float alpha, DecodeMode mode, const EncodeContext& ctx) const {
  const std::size_t k = k_for(density_for(options_.density, ctx), out.size());
  SPARQ_CHECK(msg.size() == 4 * k, "randomk: message of {} bytes, expected {}", msg.size(), 4 * k);
  prepare_output(out, mode);
  const std::uint8_t* in = msg.data();
  // Strata are disjoint, so parallel writes never collide.
  for_each_position(out.size(), k, ctx, [&](std::size_t j, std::size_t pos) {
    // Note [Written-out multiply-adds] (core/host_device.h): the device's bits.
    out[pos] = mul_add(alpha, load_f32(in + 4 * j), out[pos]);
  });
}

}  // namespace sparq::compress
