// Which Philox numbers a dropout mask uses, and the per-element keep decision, shared by the
// CPU (layers/dropout.cpp, the attention kernels) and the CUDA kernels (layers/cuda/
// dropout.cu), Note [Layer dispatch]. Free of fmt and of sparq's tensors so nvcc compiles it.
//
// Element i of a site's tensor at a step sits at Philox position pos = key.first + offset + i
// and uses word pos % 4 of block pos / 4 of philox4x32(key.seed, key.stream, .): a pure
// function of the position, so the CPU (block by block) and the device (one thread per
// block) draw the same mask bit for bit.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/rng.h"

namespace sparq {

// Which random numbers a step uses: shared by every dropout site of a model.
struct DropoutStep {
  std::uint64_t seed = 0;
  std::uint32_t rank = 0;
  std::uint64_t step = 0;
  bool training = true;
};

// The Philox coordinates of one dropout site (a layer) at one step.
struct DropoutKey {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t first = 0;               // offset of element 0
  static constexpr int kStepShift = 40;  // elements per step and site: 2^40
  // first = step << 40 holds 2^24 steps (micro-steps with accumulation); step 2^24 + k would
  // reuse step k's masks, so each further 2^24 steps draw under another Philox key. Steps
  // below 2^24 keep the seed itself: their masks are unchanged.
  static constexpr std::uint64_t kEraKeyStride = 0x9E3779B97F4A7C15ull;
  static DropoutKey make(const DropoutStep& step, std::uint32_t layer_index) {
    const std::uint64_t era = step.step >> (64 - kStepShift);
    return {step.seed + era * kEraKeyStride,
            make_stream(RngPurpose::kDropout, step.rank, layer_index), step.step << kStepShift};
  }
};

// The factor kept values are scaled by (inverted dropout), rounded once to T.
template <typename T>
SPARQ_HOST_DEVICE inline T dropout_keep_scale(float p) {
  return T(1) / (T(1) - T(p));
}

// The scale of the element whose Philox word is `word`: kept (keep_scale) when its uniform
// draw is >= p, dropped (0) otherwise.
template <typename T>
SPARQ_HOST_DEVICE inline T dropout_scale(std::uint32_t word, float p, T keep_scale) {
  return u32_to_unit_float(word) >= p ? keep_scale : T(0);
}

}  // namespace sparq
