// The keep scale of one attention-dropout element, shared by the CUDA attention kernels and
// checked on the CPU against cpu::dropout_scales (layers/dropout.h), whose draws it must
// reproduce bit for bit: element `pos` (the absolute Philox position, key.first + index)
// reads word pos % 4 of Philox block pos / 4, and is kept when its uniform u >= p.
// CUDA-free and fmt-free, so both g++ and nvcc compile it.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/rng.h"

namespace sparq {

// keep_scale is 1 / (1 - p), computed once by the caller in float as the CPU does.
SPARQ_HOST_DEVICE inline float attention_dropout_scale(std::uint64_t seed, std::uint64_t stream,
                                                       std::uint64_t pos, float p,
                                                       float keep_scale) {
  const auto words = philox4x32(seed, stream, pos / 4);
  return u32_to_unit_float(words[pos % 4]) >= p ? keep_scale : 0.0f;
}

}  // namespace sparq
