// ReLU's per-element rule, shared by the CPU loops (activation.cpp) and the CUDA functors
// (cuda/activation.cu) so that both give the same values (core/host_device.h).
#pragma once

#include "core/host_device.h"

namespace sparq::relu_math {

// max(x, 0) that lets NaN through, as PyTorch's relu does. `x > 0 ? x : 0` alone turned a NaN
// into 0: a NaN from a convolution became a channel of zeros and VGG's loss stayed finite
// while its gradient was NaN (review, 2026-12-06).
template <typename T>
SPARQ_HOST_DEVICE inline T forward(T x) {
  return x > T(0) || x != x ? x : T(0);
}

// dL/dx from the output y: dy where y > 0, else 0 (also where y is NaN, as PyTorch's
// threshold_backward does: the NaN is already in the loss).
template <typename T>
SPARQ_HOST_DEVICE inline T backward(T y, T dy) {
  return y > T(0) ? dy : T(0);
}

}  // namespace sparq::relu_math
