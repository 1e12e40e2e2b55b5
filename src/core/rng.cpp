#include "core/rng.h"

#include <cmath>
#include <numbers>

namespace sparq {

std::uint32_t random_u32_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return philox4x32(seed, stream, i / 4)[i % 4];
}

float uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return u32_to_unit_float(random_u32_at(seed, stream, i));
}

namespace {

// Box-Muller from two words of one block. Element i uses block i / 2 and lanes
// (2 * (i % 2), 2 * (i % 2) + 1), so every normal is addressable on its own.
float box_muller(std::uint32_t a, std::uint32_t b) {
  // u1 in (0, 1] so log(u1) is finite; u2 in [0, 1).
  const float u1 = (static_cast<float>(a >> 8) + 1.0f) * (1.0f / 16777216.0f);
  const float u2 = u32_to_unit_float(b);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * std::numbers::pi_v<float> * u2);
}

}  // namespace

float normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  const auto block = philox4x32(seed, stream, i / 2);
  const int lane = static_cast<int>(i % 2) * 2;
  return box_muller(block[lane], block[lane + 1]);
}

void fill_uniform(float* out, std::size_t n, float low, float high, std::uint64_t seed,
                  std::uint64_t stream, std::uint64_t first) {
  const float span = high - low;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::size_t i = 0; i < n; ++i) out[i] = low + span * uniform_at(seed, stream, first + i);
}

void fill_normal(float* out, std::size_t n, float mean, float stddev, std::uint64_t seed,
                 std::uint64_t stream, std::uint64_t first) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::size_t i = 0; i < n; ++i) out[i] = mean + stddev * normal_at(seed, stream, first + i);
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

float Rng::normal() {
  const std::uint32_t a = next_u32();
  return box_muller(a, next_u32());
}

std::uint64_t Rng::below(std::uint64_t n) {
  // Reject the top partial copy of [0, n) so every residue is equally likely.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % n;
}

std::uint32_t hash_name(const char* name) {
  std::uint32_t h = 2166136261u;
  for (const char* p = name; *p; ++p) {
    h ^= static_cast<unsigned char>(*p);
    h *= 16777619u;
  }
  return h;
}

}  // namespace sparq
