// Little-endian field access for message bytes (fields may be unaligned), LEB128 varints, and
// the raw f32 form of per-bucket state (Compressor/Aggregator save_state).
// sparq targets little-endian hosts; the static_assert makes a port to another one explicit.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "compress/magnitude_key.h"
#include "core/status.h"

namespace sparq::compress {

static_assert(std::endian::native == std::endian::little, "message fields are little-endian");

inline void store_u16(std::uint8_t* p, std::uint16_t v) { std::memcpy(p, &v, 2); }
inline void store_u32(std::uint8_t* p, std::uint32_t v) { std::memcpy(p, &v, 4); }
inline void store_f32(std::uint8_t* p, float v) { std::memcpy(p, &v, 4); }
inline std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_f32(const std::uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// Unsigned LEB128: 7 bits per byte, high bit set on every byte but the last.
inline std::size_t varint_size(std::uint32_t v) {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}
inline std::uint8_t* put_varint(std::uint8_t* p, std::uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
  return p;
}
// Returns nullptr when the varint runs past `end` or is longer than 5 bytes.
inline const std::uint8_t* get_varint(const std::uint8_t* p, const std::uint8_t* end,
                                      std::uint32_t& v) {
  v = 0;
  for (int shift = 0; shift < 35 && p < end; shift += 7) {
    const std::uint8_t byte = *p++;
    v |= static_cast<std::uint32_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return p;
  }
  return nullptr;
}

// abs_key (the magnitude as an integer) is in magnitude_key.h, shared with the device.
inline float key_to_float(std::uint32_t key) { return std::bit_cast<float>(key); }

// Per-bucket f32 state (dgc's momentum, two_phase's server residual) as raw little-endian
// bytes. load_floats resizes `out` to what was saved; `what` names the state in errors.
inline void save_floats(std::span<const float> values, std::vector<std::uint8_t>& out) {
  out.resize(values.size_bytes());
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
}
inline Status load_floats(std::span<const std::uint8_t> in, std::vector<float>& out,
                          std::string_view what) {
  if (in.size() % sizeof(float) != 0) {
    return Status::error("{}: saved state of {} bytes is not f32", what, in.size());
  }
  out.resize(in.size() / sizeof(float));
  if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
  return Status::ok();
}

}  // namespace sparq::compress
