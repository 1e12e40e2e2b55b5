// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011). A number is a pure
// function of (seed, stream, offset), so any element can be generated independently: the
// same triple gives the same value on CPU and CUDA, in any thread order, and nothing has to
// be stored to regenerate a dropout mask or a random-k index set.
//
// Streams separate purposes and ranks: make_stream(RngPurpose::kDropout, rank, layer) gives
// a 64-bit stream id whose numbers never overlap another purpose's, rank's or index's.
#pragma once

#include <array>
#include <cstdint>

#include "core/host_device.h"

namespace sparq {

enum class RngPurpose : std::uint8_t { kInit = 1, kDropout = 2, kData = 3, kCompression = 4 };

// 8 bits purpose | 24 bits rank | 32 bits index (layer, bucket, parameter hash, ...).
SPARQ_HOST_DEVICE constexpr std::uint64_t make_stream(RngPurpose purpose, std::uint32_t rank,
                                                      std::uint32_t index) {
  return (static_cast<std::uint64_t>(purpose) << 56) |
         (static_cast<std::uint64_t>(rank & 0xffffffu) << 32) | index;
}

// One Philox-4x32-10 block: 4 random 32-bit words for counter (offset, stream) and key seed.
SPARQ_HOST_DEVICE inline std::array<std::uint32_t, 4> philox4x32(std::uint64_t seed,
                                                                 std::uint64_t stream,
                                                                 std::uint64_t block) {
  std::uint32_t c0 = static_cast<std::uint32_t>(block), c1 = static_cast<std::uint32_t>(block >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(stream), c3 = static_cast<std::uint32_t>(stream >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2;
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// Uniform float in [0, 1) from the top 24 bits (every value exactly representable).
SPARQ_HOST_DEVICE inline float u32_to_unit_float(std::uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// Element-addressed draws: the i-th number of a (seed, stream) sequence.
std::uint32_t random_u32_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i);
float uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i);  // [0, 1)
float normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t i);   // N(0, 1)

// Fill helpers (OpenMP-parallel, results independent of the thread count).
void fill_uniform(float* out, std::size_t n, float low, float high, std::uint64_t seed,
                  std::uint64_t stream, std::uint64_t first = 0);
void fill_normal(float* out, std::size_t n, float mean, float stddev, std::uint64_t seed,
                 std::uint64_t stream, std::uint64_t first = 0);

// A sequential generator for host-side code (shuffles, sampling). Its whole state is
// (seed, stream, position), which is what a checkpoint saves.
class Rng {
 public:
  struct State {
    std::uint64_t seed = 0;
    std::uint64_t stream = 0;
    std::uint64_t position = 0;
  };

  Rng(std::uint64_t seed, std::uint64_t stream) : state_{seed, stream, 0} {}
  explicit Rng(State state) : state_(state) {}

  std::uint32_t next_u32() { return random_u32_at(state_.seed, state_.stream, state_.position++); }
  std::uint64_t next_u64();
  float uniform() { return u32_to_unit_float(next_u32()); }  // [0, 1)
  float normal();
  // Unbiased integer in [0, n) (rejection sampling, n > 0).
  std::uint64_t below(std::uint64_t n);

  const State& state() const { return state_; }

 private:
  State state_;
};

// Stable 32-bit hash of a string (FNV-1a), e.g. to derive a per-parameter init stream.
std::uint32_t hash_name(const char* name);

}  // namespace sparq
