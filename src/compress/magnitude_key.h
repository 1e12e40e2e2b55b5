// The float's magnitude as an integer key, one definition for the host and the device: the
// order of these keys is the order of |x| for every finite x, which is what radix selection
// (topk_select.cpp, cuda/topk.cu) and threshold comparisons (cuda/varcount_select.cu) rely
// on. -0 and +0 get the same key.
#pragma once

#include <cstdint>

#include "core/half_math.h"

namespace sparq::compress {

SPARQ_HOST_DEVICE inline std::uint32_t abs_key(float x) { return float_as_bits(x) & 0x7fffffffu; }

}  // namespace sparq::compress
