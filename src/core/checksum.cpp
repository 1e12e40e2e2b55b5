#include "core/checksum.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace sparq {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checksum64 reads words in native order, which the formats define as little-endian");

constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

// Folds the whole 8-byte words of [p, p + n) into state; returns the bytes consumed.
std::size_t fold_words(std::uint64_t* state, const std::uint8_t* p, std::size_t n) {
  const std::size_t words = n / 8;
  std::uint64_t h = *state;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    h = (h ^ w) * kFnvPrime;
  }
  *state = h;
  return words * 8;
}

std::uint64_t fold_tail(std::uint64_t h, const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

}  // namespace

std::uint64_t mixed_hash64(const void* data, std::size_t bytes) {
  constexpr std::uint64_t kP1 = 0x9e3779b97f4a7c15ull, kP2 = 0xc2b2ae3d27d4eb4full;
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint64_t h = 0x27d4eb2f165667c5ull ^ bytes;
  const auto mix = [&](std::uint64_t w) {
    h = std::rotl(h ^ std::rotl(w * kP1, 31) * kP2, 27) * kP1;
  };
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    mix(w);
  }
  std::uint64_t tail = 0;
  if (bytes > i) std::memcpy(&tail, p + i, bytes - i);  // p may be null when bytes is 0
  mix(tail);
  // The final avalanche: every bit of the state reaches every bit of the result.
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  return h;
}

std::uint64_t checksum64(const void* data, std::size_t bytes) {
  Checksum64 c;
  c.update(data, bytes);
  return c.digest();
}

void Checksum64::update(const void* data, std::size_t bytes) {
  // An empty span's data() may be null, and memcpy from null is undefined even for 0 bytes
  // (UBSan, review 2026-12-06).
  if (bytes == 0) return;
  const auto* p = static_cast<const std::uint8_t*>(data);
  if (pending_bytes_ > 0) {  // complete the pending word first
    const std::size_t take = std::min(bytes, 8 - pending_bytes_);
    std::memcpy(pending_ + pending_bytes_, p, take);
    pending_bytes_ += take;
    p += take;
    bytes -= take;
    if (pending_bytes_ < 8) return;
    fold_words(&state_, pending_, 8);
    pending_bytes_ = 0;
  }
  const std::size_t done = fold_words(&state_, p, bytes);
  pending_bytes_ = bytes - done;
  std::memcpy(pending_, p + done, pending_bytes_);
}

std::uint64_t Checksum64::digest() const { return fold_tail(state_, pending_, pending_bytes_); }

}  // namespace sparq
